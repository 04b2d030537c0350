"""gflkit's methods inside Flower (gflkit/flower/): the same numbers as gflkit's engine, client state kept
in Flower's per-client context, personalised models sent to their own client only, clear refusals.

Every Flower run here goes through Flower's Simulation Runtime in this process (``run_inprocess``: the
SuperLink's in-memory LinkState and Grid, Flower's runtime loop and per-node contexts, the ClientApp
called in-process instead of in Ray actors) on 6 clients of scikit-learn's embedded ``digits`` with an
MCLR, 3 rounds; each run takes about 2 s (most of it Flower's polling and shut-down intervals).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="the flower extra is not installed (pip install -e .[flower])")

from gflkit.algorithms import build_algorithm  # noqa: E402
from gflkit.engine import run_rounds  # noqa: E402
from gflkit.experiment import RunConfig, build_federation  # noqa: E402
from gflkit.flower import (GflkitStrategy, UnsupportedMethod, make_client_app, run_flower,  # noqa: E402
                           supported_methods)
from gflkit.flower.client import DOWN, STATE, UP  # noqa: E402
from gflkit.flower.replica import from_record  # noqa: E402
from gflkit.runtime import Runtime

OPTIONS = {"ifca": {"num_clusters": 2}}


def config(method: str, **changes) -> RunConfig:
    """A tiny run: 6 digits clients with 2 label shards each, MCLR, 3 rounds."""
    fields = dict(dataset="digits", num_clients=6, method=method, method_options=OPTIONS.get(method, {}),
                  partition_options={"shards_per_client": 2}, max_samples=600, rounds=3, batch_size=16, lr=0.05)
    return RunConfig(**{**fields, **changes})


def engine_run(cfg: RunConfig, local_training: str = "sequential"):
    """gflkit's own engine on ``cfg``: (federation, algorithm, records)."""
    fed = build_federation(cfg, Runtime(device="cpu", local_training=local_training))
    algorithm = build_algorithm(cfg.method, **cfg.method_options)
    records = run_rounds(fed, algorithm, cfg.schedule(), progress=False)
    return fed, algorithm, records


def assert_same_numbers(cfg: RunConfig, run, local_training: str = "sequential", atol: float = 1e-6) -> None:
    """The Flower run ``run`` holds the engine's per-client models, client-kept state and records."""
    fed, algorithm, records = engine_run(cfg, local_training)
    expected = algorithm.evaluation_models(fed)
    expected = expected.expand(fed.num_clients, -1) if expected.dim() == 1 else expected
    torch.testing.assert_close(run.models(), expected, rtol=0, atol=atol)
    for slot in run.strategy.split.kept:  # what stays on the clients (Ditto's personal models, controls, ...)
        for client in range(fed.num_clients):
            torch.testing.assert_close(run.client_state(client)[slot.key], slot.get(fed, algorithm, client),
                                       rtol=0, atol=atol)
    flower = run.records()
    columns = [c for c in records.columns if c not in ("local_training",)]
    assert list(flower[["round", "client"]].itertuples(index=False)) == \
        list(records[["round", "client"]].itertuples(index=False))
    np.testing.assert_allclose(flower[columns].to_numpy(float), records[columns].to_numpy(float), rtol=0, atol=atol)


def spy(log: list):
    """A Flower client mod recording, per message, the receiving client, the tensors it got and sent back."""
    def mod(message, context, call_next):
        reply = call_next(message, context)
        log.append({
            "client": int(context.node_config["partition-id"]),
            "type": message.metadata.message_type,
            "round": int(message.content["config"]["server-round"]) if "config" in message.content
            and "server-round" in message.content["config"] else None,
            "down": from_record(message.content[DOWN]) if DOWN in message.content else {},
            "up": from_record(reply.content[UP]) if reply.has_content() and UP in reply.content else {},
        })
        return reply
    return mod


@pytest.mark.parametrize("method, changes", [
    ("fedavg", {}), ("ifca", {}), ("fedu", {}), ("pfedgraph", {}), ("local", {}), ("fedamp", {}), ("fedper", {}),
    ("fedatt", {}),  # on the public surface: its split follows from the Method class
    ("pdca", {"channel": {"noise_scale": 0.1, "missing_rate": 0.1}}),  # JGESR reads the channel's upload mask
], ids=lambda value: value if isinstance(value, str) else "")
def test_flower_reproduces_the_engine(method, changes):
    cfg = config(method, **changes)
    assert_same_numbers(cfg, run_flower(cfg, Runtime(device="cpu")))


def test_fedprox_partial_participation_matches_the_batched_engine():
    # 4 of 6 clients per round, evaluated every 2 rounds (and at the last); the engine trains them batched
    cfg = config("fedprox", clients_per_round=4, eval_every=2)
    run = run_flower(cfg, Runtime(device="cpu"))
    assert_same_numbers(cfg, run, local_training="auto", atol=1e-5)
    assert sorted(set(run.records()["round"])) == [2, 3]


def test_a_personalised_method_on_the_public_surface_runs_in_flower_and_sends_each_client_its_row():
    from gflkit.algorithms import ALGORITHMS, register_method
    from test_method import NeighbourMean

    register_method(NeighbourMean)
    try:
        assert "neighbour_mean" in supported_methods()
        cfg = config("neighbour_mean")
        log: list = []
        assert_same_numbers(cfg, run_flower(cfg, Runtime(device="cpu"), mods=[spy(log)]))
        dim = build_federation(cfg, Runtime(device="cpu")).dim
        assert all(set(e["down"]) == {"fed.models"} and e["down"]["fed.models"].shape == (dim,)
                   for e in log if e["type"] == "train")
    finally:
        ALGORITHMS.pop("neighbour_mean")


def test_sfl_personalised_rows_reach_only_their_client():
    cfg = config("sfl")
    log: list = []
    run = run_flower(cfg, Runtime(device="cpu"), mods=[spy(log)])
    assert_same_numbers(cfg, run)
    aggregated, dim = run.strategy.algorithm.aggregated, run.strategy.fed.dim
    assert len({tuple(row.tolist()) for row in aggregated}) >= 5  # personalised: the clients' rows differ
    for entry in log:
        if entry["type"] in ("train", "evaluate"):
            assert set(entry["down"]) == {"fed.global_model", "algorithm.aggregated"}
            assert all(tensor.shape == (dim,) for tensor in entry["down"].values())  # one row, never K x d
    last = [e for e in log if e["type"] == "evaluate" and e["round"] == cfg.rounds]
    assert sorted(e["client"] for e in last) == list(range(6))
    for entry in last:  # the final personalised row u_k went to client k
        assert torch.equal(entry["down"]["algorithm.aggregated"], aggregated[entry["client"]])


def test_ditto_personal_models_never_leave_their_clients_and_survive_recreated_clients():
    # a new ClientApp and an empty run cache for every message: the personal model and the persistent
    # Adam state survive in Flower's Context.state only
    cfg = config("ditto", optimizer="adam", lr=0.01, optimizer_state="persistent")
    log: list = []
    run = run_flower(cfg, Runtime(device="cpu"), fresh_clients=True, mods=[spy(log)])
    assert_same_numbers(cfg, run)
    personal = [run.client_state(k)["fed.models"] for k in range(6)]
    assert any(key.startswith("optimizer.1.") for key in run.client_state(0))  # the personal model's Adam state
    for entry in log:
        if entry["type"] == "train":
            assert set(entry["up"]) == {"vector"}  # the global copy only
        for tensor in [*entry["down"].values(), *entry["up"].values()]:
            assert not any(tensor.shape == p.shape and torch.allclose(tensor, p) for p in personal)


@pytest.mark.parametrize("cfg", [config("scaffold"), config("fedavg", momentum=0.9, optimizer_state="persistent")],
                         ids=["scaffold-control-variates", "fedavg-persistent-momentum"])
def test_client_state_survives_recreated_clients(cfg):
    assert_same_numbers(cfg, run_flower(cfg, Runtime(device="cpu"), fresh_clients=True))


def test_losing_the_client_state_changes_the_numbers():
    # the control for the tests above: wipe Context.state before every message and Ditto drifts away
    def forget(message, context, call_next):
        if STATE in context.state:
            del context.state[STATE]
        return call_next(message, context)

    cfg = config("ditto")
    fed, algorithm, _ = engine_run(cfg)
    run = run_flower(cfg, Runtime(device="cpu"), mods=[forget])
    assert not torch.allclose(run.models(), fed.models, atol=1e-4)


@pytest.mark.parametrize("method", ["fedska", "cfl", "moon"])
def test_unsupported_methods_fail_in_one_line(method):
    cfg = config(method, method_options={"k": 3} if method == "fedska" else {})
    for build in (lambda: GflkitStrategy(cfg, device="cpu"), lambda: make_client_app(cfg),
                  lambda: run_flower(cfg, Runtime(device="cpu"))):
        with pytest.raises(UnsupportedMethod) as error:
            build()
        message = str(error.value)
        assert "\n" not in message and repr(method) in message and "not supported" in message
        assert "sfl" in message  # names what is supported
    assert method not in supported_methods()


def test_sfl_partial_sharing_is_refused_in_one_line():
    with pytest.raises(UnsupportedMethod, match=r"^gflkit\.flower: sfl with share='encoder' is not supported[^\n]*$"):
        GflkitStrategy(config("sfl", method_options={"share": "encoder"}), device="cpu")
