"""A method defined outside gflkit (a notebook, a user's package) runs by name once registered."""
from __future__ import annotations

import pandas as pd
import pytest

from gflkit.algorithms import ALGORITHMS, Algorithm, FedAvg, register_method, registered_methods
from gflkit.experiment import RunConfig, run
from gflkit.results import ResultStore
from gflkit.runtime import Runtime

SMALL = dict(dataset="digits", num_clients=6, partition="shards", partition_options={"shards_per_client": 2},
             rounds=2, batch_size=16, lr=0.05)


def coordinate_median() -> type[Algorithm]:
    """A method of a user's own: FedAvg's rounds, the server taking each coordinate's median upload."""
    class CoordinateMedian(FedAvg):
        name = "coordinate_median"

        def aggregate(self, fed, clients, updates, round):
            fed.global_model = updates.median(dim=0).values

    return CoordinateMedian


@pytest.fixture
def registered():
    """``coordinate_median`` registered for one test, and unregistered after it."""
    method = register_method(coordinate_median())
    yield method
    ALGORITHMS.pop(method.name, None)


def test_a_registered_method_runs_by_name_is_stored_and_differs_from_fedavg(registered, tmp_path):
    store = ResultStore(tmp_path)
    config = RunConfig(**SMALL, method="coordinate_median")
    records = run(config, Runtime(device="cpu", store=store), progress=False)
    assert registered_methods() == {"coordinate_median": registered}
    again = run(config, Runtime(device="cpu", store=store), progress=False)  # read back from the store
    pd.testing.assert_frame_equal(records, again)
    fedavg = run(config.replace(method="fedavg"), Runtime(device="cpu"), progress=False)
    assert not records["accuracy"].equals(fedavg["accuracy"])


def test_registering_the_same_class_again_replaces_it(registered):
    rerun = coordinate_median()  # a notebook cell run a second time: a new class object of the same name
    assert register_method(rerun) is rerun and ALGORITHMS["coordinate_median"] is rerun


@pytest.mark.parametrize("make, error, says", [
    (lambda: type("Mine", (FedAvg,), {"name": "fedavg"}), ValueError, "the method name 'fedavg' is taken by"),
    (lambda: type("Mine", (FedAvg,), {"name": "my method"}), ValueError, "Mine.name must be a non-empty identifier"),
    (lambda: type("Mine", (), {"name": "mine"}), TypeError, "takes a subclass of gflkit.algorithms.Algorithm"),
])
def test_a_method_that_cannot_be_registered_is_refused_in_one_line(make, error, says):
    with pytest.raises(error, match=says):
        register_method(make())
    assert set(ALGORITHMS) >= {"fedavg"} and "mine" not in ALGORITHMS and "my method" not in ALGORITHMS


def test_another_class_under_a_registered_name_is_refused(registered):
    other = type("Other", (FedAvg,), {"name": "coordinate_median"})
    with pytest.raises(ValueError, match="'coordinate_median' is taken by .*CoordinateMedian"):
        register_method(other)
    assert ALGORITHMS["coordinate_median"] is registered
