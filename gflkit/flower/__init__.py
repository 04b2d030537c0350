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

* :class:`GflkitStrategy` and :func:`make_server_app`: the server side;
* :func:`make_client_app`: the client side;
* :func:`run_flower`: both in Flower's Simulation Runtime in this process (:func:`run_inprocess`: no
  Ray, for tests and notebooks). The two apps are ordinary Flower apps, meant for
  ``flwr.simulation.run_simulation`` (Ray) or a deployment too; only the in-process runtime is exercised
  by the tests.
"""
try:
    import flwr  # noqa: F401
except ImportError as error:  # pragma: no cover - the extra is part of make setup
    raise ImportError("gflkit.flower needs Flower: pip install -e .[flower] (make setup installs it)") from error

from gflkit.flower.client import make_client_app  # noqa: E402
from gflkit.flower.methods import UnsupportedMethod, check_method, supported_methods  # noqa: E402
from gflkit.flower.simulation import FlowerRun, InProcessBackend, run_flower, run_inprocess  # noqa: E402
from gflkit.flower.strategy import GflkitStrategy, make_server_app  # noqa: E402

__all__ = ["FlowerRun", "GflkitStrategy", "InProcessBackend", "UnsupportedMethod", "check_method",
           "make_client_app", "make_server_app", "run_flower", "run_inprocess", "supported_methods"]
