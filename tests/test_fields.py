"""The plain fields of a run are checked by the standard library alone, with the messages RunConfig gives."""
import subprocess
import sys

import pytest

from gflkit.fields import check_plain_fields, check_sweep_not_emptied


@pytest.mark.parametrize("values, message", [
    ({"rounds": 0}, "rounds must be a positive number of communication rounds, got 0"),
    ({"rounds": 2.5}, "rounds must be an integer, got 2.5"),
    ({"seed": True}, "seed must be an integer, got True"),
    ({"num_clients": 0}, "num_clients must be >= 1, got 0"),
    ({"lr": float("inf")}, "lr must be a finite number, got inf"),
    ({"momentum": "0.9"}, "momentum must be a finite number, got '0.9'"),
    ({"test_ratio": 1.0}, "test_ratio must lie in (0, 1) or be None, got 1.0"),
    ({"held_out": -0.1}, "held_out must be a fraction of the clients in [0, 1), got -0.1"),
    ({"num_clients": 5, "max_samples": 4}, "max_samples (4) must be at least num_clients (5)"),
])
def test_a_wrong_plain_field_is_named(values, message):
    with pytest.raises(ValueError) as failure:
        check_plain_fields(values)
    assert str(failure.value) == message


@pytest.mark.parametrize("values", [
    {}, {"rounds": 1, "num_clients": 1, "lr": 0, "test_ratio": None, "max_samples": None, "held_out": 0.5},
    {"dataset": "anything", "method": 3},  # names are RunConfig's to check against their registries
    {"max_samples": 4},  # compared with num_clients only when both are given
])
def test_fitting_or_unrelated_values_pass(values):
    check_plain_fields(values)


def test_run_config_gives_the_same_message():
    from gflkit.experiment import RunConfig

    with pytest.raises(ValueError, match=r"^rounds must be a positive number of communication rounds, got 0$"):
        RunConfig(dataset="digits", rounds=0)


def test_an_emptied_sweep_entry_is_refused_with_an_example_where_one_is_known():
    with pytest.raises(ValueError, match=r"sweep entry 'methods' is empty: .* name at least one, e.g. "
                                         r"\{'methods': \['fedavg'\]\}$"):
        check_sweep_not_emptied({"methods": []}, {"methods": ("fedavg", "sfl")})
    with pytest.raises(ValueError, match=r"name at least one$"):
        check_sweep_not_emptied({"shards": ()})
    check_sweep_not_emptied({"methods": ["fedavg"], "table3": []})  # a section's own entry may be emptied


def test_the_module_imports_no_torch():
    code = "import sys, gflkit.fields; print(sorted(m for m in ('torch', 'pandas', 'numpy') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
