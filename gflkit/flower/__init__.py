"""gflkit's methods inside Flower: a ``Strategy`` and a ``ClientApp`` over the same engine pieces.

Install with ``pip install -e .[flower]`` (``make setup`` does). The mapping, one gflkit round ``t`` of
:func:`gflkit.engine.run_rounds` ↔ one Flower round ``server_round = t``:

* gflkit's client ``k`` (partition ``k`` of the ``RunConfig``) ↔ the SuperNode with ``partition-id = k``;
* ``sample_clients(…, seed, t)`` ↔ ``GflkitStrategy.configure_train`` (the same seeded draw);
* the server state ``algorithm.configure`` / ``local_context`` / the loss term read ↔ ``Split.down``, sent
  to client ``k`` only (the global model, row ``k`` of the ``K × d`` state, IFCA's cluster models);
* ``algorithm.round_updates(fed, [k], t)`` — gflkit's local loop (``local_sgd``) with the method's loss
  term, then ``finish_client`` — ↔ the ClientApp's ``train``: the same call on the node's copy of the run;
* state kept on the client (Ditto's ``fed.models[k]``, SCAFFOLD's control variate, optimiser state) ↔
  ``Context.state["gflkit"]`` (``Split.kept``), never sent;
* ``fed.upload`` → ``algorithm.aggregate(fed, S, U, t)`` ↔ ``GflkitStrategy.aggregate_train`` (unchanged);
* scoring under the ``server`` / ``local`` protocols ↔ ``configure_evaluate``: every client scores on its
  own splits → :meth:`GflkitStrategy.records`.

With the same config and seed, the per-client models and records equal the engine's to floating-point
tolerance (minibatch order and dropout are seeded by ``(seed, round, client, stream)``, not by the order
in which Flower runs clients). Supported methods: :func:`supported_methods`; any other method fails with a
one-line :class:`UnsupportedMethod` (FedSKA's server needs extra gradient round trips per round).

* :mod:`gflkit.flower.app`: the app ``flwr run`` starts (``flower_app/`` is its template project): the
  ServerApp and ClientApp read the run from Flower's run config and node config;
* :class:`GflkitStrategy` and :func:`make_server_app`: the server side for a config given in Python;
* :func:`make_client_app`: the client side (a node holds only its own partition);
* :func:`run_flower`: both in Flower's Simulation Runtime in this process (:func:`run_inprocess`: no
  Ray, for tests and notebooks). It drives Flower internals, so it is imported on first use and fails
  in one line, pointing to ``flwr run``, on a flwr without them; nothing else here uses them.
"""
try:
    import flwr  # noqa: F401
except ImportError as error:  # pragma: no cover - the extra is part of make setup
    raise ImportError("gflkit.flower needs Flower: pip install -e .[flower] (make setup installs it)") from error

from gflkit.flower.client import make_client_app  # noqa: E402
from gflkit.flower.methods import UnsupportedMethod, check_method, supported_methods  # noqa: E402
from gflkit.flower.strategy import GflkitStrategy, make_server_app, run_strategy  # noqa: E402

_SIMULATION = ("FlowerRun", "InProcessBackend", "run_flower", "run_inprocess")


def __getattr__(name: str):
    """The in-process runtime's names, imported on first use (:mod:`gflkit.flower.simulation`)."""
    if name in _SIMULATION:
        from gflkit.flower import simulation

        return getattr(simulation, name)
    raise AttributeError(f"module 'gflkit.flower' has no attribute {name!r}")


__all__ = ["FlowerRun", "GflkitStrategy", "InProcessBackend", "UnsupportedMethod", "check_method",
           "make_client_app", "make_server_app", "run_flower", "run_inprocess", "run_strategy", "supported_methods"]
