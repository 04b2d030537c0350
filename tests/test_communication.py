"""Communication cost per participating client per round (gflkit.communication), hand-counted on tiny models."""
import math

import pytest
import torch

from gflkit.algorithms import ALGORITHMS, build_algorithm
from gflkit.algorithms import method_communication
from gflkit.communication import FLOAT32_BYTES, Communication

from conftest import make_federation
from graph_fixtures import make_graph_federation

# make_federation's MCLR on 2×4×4 inputs, 3 classes: hidden Linear(32 → 64) and classifier Linear(64 → 3)
ENCODER = 32 * 64 + 64  # FedPer's shared base layer
HEAD = 64 * 3 + 3  # LG-FedAvg's shared classifier
D = ENCODER + HEAD
FEDCG_TINY = {"base": "simple_cnn", "num_domains": 3}


def communication(name, fed=None, **options):
    return method_communication(make_federation() if fed is None else fed, name, **options)


def test_bytes_are_four_per_float32_value_and_costs_add():
    cost = Communication(3, 5) + Communication.both(2)
    assert (cost.up_floats, cost.down_floats) == (5, 7)
    assert (cost.bytes_up, cost.bytes_down) == (20, 28) and FLOAT32_BYTES == 4
    with pytest.raises(ValueError, match=">= 0"):
        Communication(-1, 0)


def test_the_tiny_model_has_the_hand_counted_dimension():
    assert make_federation().dim == D == 2307


def test_dense_methods_send_one_model_each_way():
    for name in ("fedavg", "fedprox", "ditto", "moon", "fedatt", "cfl", "fedamp", "fedu", "pdca", "two_step"):
        assert communication(name) == Communication(D, D), name
    assert communication("fedavg").bytes_up == 4 * D


def test_partial_sharing_sends_only_the_shared_entries():
    assert communication("fedper") == Communication(ENCODER, ENCODER)
    assert communication("lg_fedavg") == Communication(HEAD, HEAD)
    assert communication("fedavg", share="head") == Communication(HEAD, HEAD)
    assert communication("fedprox", share="encoder") == Communication(ENCODER, ENCODER)
    assert communication("fedvgae", validation="train") == Communication(ENCODER, ENCODER)  # its default share


def test_sfl_counts_what_its_client_step_reads():
    # the paper's step reads u_k and w (the pulls' anchors) and sends v_k up
    assert communication("sfl") == Communication(D, 2 * D)
    assert communication("sfl", lam_global=0.0) == Communication(D, D)
    assert communication("sfl", start="global", regulariser="detached") == Communication(D, D)  # authors' code
    assert communication("sfl", start="personal", regulariser="detached") == Communication(D, 0)
    assert communication("sfl", share="head") == Communication(HEAD, 2 * HEAD)  # SFL+LG
    assert communication("sfl", share="encoder", start="graph", regulariser="detached") == Communication(ENCODER,
                                                                                                      ENCODER)


def test_clustered_control_variate_and_local_methods():
    assert communication("ifca") == Communication(D, 3 * D)
    assert communication("ifca", num_clusters=2) == Communication(D, 2 * D)
    assert communication("scaffold") == Communication(2 * D, 2 * D)
    assert communication("local") == Communication(0, 0)


def test_scaffold_control_variates_leave_buffers_out():
    fed = make_federation(model="fedcg", model_options=FEDCG_TINY)
    parameters = int(fed.layout.parameter_mask().sum())
    assert parameters < fed.dim  # the FedCG network has buffers
    assert communication("scaffold", fed) == Communication.both(fed.dim + parameters)


def test_graph_methods_with_extra_vectors():
    assert communication("pfedgraph") == Communication(D, D)
    assert communication("pfedgraph", regularizer="neighbours") == Communication(D, 2 * D)
    assert communication("fedpub") == Communication(D + 64, D)  # θ_i and the 64-d functional embedding up


def test_fedska_counts_the_per_sample_structure_exchange():
    samples, width, epochs = 30, 64, 3  # 30 training samples per client, MCLR's 64-d representation
    features = (epochs + 1) * samples * width
    assert communication("fedska", k=2, encoder_epochs=epochs) == Communication.both(D + features)
    assert communication("fedska", k=2, encoder_epochs=epochs, fedavg=False) == Communication.both(features)


def test_fedska_averages_the_sample_counts_over_the_training_clients():
    fed = make_federation()
    fed.data.train_indices[0] = fed.data.train_indices[0][:10]  # 10, 30, 30, 30 training samples: 25 on average
    assert communication("fedska", fed, k=2, encoder_epochs=1) == Communication.both(D + 2 * 25 * 64)


def tiny_federation(name):
    """A federation each method runs on (FedSage+ needs subgraph clients, FedCG its network)."""
    if name == "fedsage":
        return make_graph_federation("node_classification")
    if name == "fedcg":
        return make_federation(model="fedcg", model_options=FEDCG_TINY)
    if name == "fedcg_kmeans":
        held_out = torch.tensor([False] * 6 + [True])
        return make_federation(num_clients=7, model="fedcg", held_out=held_out,
                               model_options={**FEDCG_TINY, "domains": "assigned"})
    return make_federation()


TINY_OPTIONS = {"fedska": {"k": 2}, "fedvgae": {"validation": "train"}}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_method_declares_a_non_negative_cost(name):
    fed = tiny_federation(name)
    cost = communication(name, fed, **TINY_OPTIONS.get(name, {}))
    assert isinstance(cost, Communication)
    assert all(math.isfinite(c) and c >= 0 for c in (cost.up_floats, cost.down_floats))
    if name != "local":
        assert cost.up_floats > 0 and cost.down_floats > 0
    if name in ("fedsage", "fedcg", "fedcg_kmeans"):  # FedAvg of their whole network
        assert cost == Communication.both(fed.dim)
