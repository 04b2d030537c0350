import pytest
import torch

from gflkit.models import build_model
from gflkit.state import FlatModule

from graph_fixtures import block_graph


def test_features_are_mu_in_eval_mode_and_sampled_in_training():
    graph = block_graph()
    torch.manual_seed(0)
    model = build_model("vgae", (graph.num_features,), 0)
    model.eval()
    z = model.features(graph)
    mu, _ = model.vgae.encoder(graph.x, graph.edge_index)
    assert z.shape == (graph.num_nodes, 16) and model.feature_dim == 16
    assert torch.equal(z, mu) and torch.equal(model(graph), z), "no readout: the head is the identity"
    model.train()
    assert not torch.equal(model.features(graph), mu)


def test_readout_gives_class_scores_from_the_latent_representation():
    graph = block_graph()
    model = build_model("vgae", (graph.num_features,), 3, hidden=8, out=4, readout_hidden=5)
    model.eval()
    assert model(graph).shape == (graph.num_nodes, 3)
    assert [tuple(layer.weight.shape) for layer in (model.readout, model.classifier)] == [(5, 4), (3, 5)]


def test_auxiliary_loss_is_the_kl_term_over_the_number_of_nodes():
    graph = block_graph()
    model = build_model("vgae", (graph.num_features,), 0)
    model.features(graph)
    mu, logstd = model.vgae.encoder(graph.x, graph.edge_index)
    n = graph.num_nodes
    kl_per_node = -0.5 * (1 + 2 * logstd - mu**2 - logstd.exp() ** 2).sum(1)
    assert torch.allclose(model.auxiliary_loss(), kl_per_node.mean() / n, atol=1e-6)


def test_encoder_mask_selects_the_gcn_layers_and_leaves_the_readout_local():
    model = build_model("vgae", (6,), 3)
    flat = FlatModule(model)
    mask = model.encoder_mask(flat.layout)
    for entry in flat.layout.entries:
        expected = entry.name.startswith("vgae.encoder.")
        assert bool(mask[entry.slice].all()) == expected and bool(mask[entry.slice].any()) == expected, entry.name
    assert {e.name.split(".")[0] for e in flat.layout.entries} == {"vgae", "readout", "classifier"}
    link_model = build_model("vgae", (6,), 0)
    assert bool(link_model.encoder_mask(FlatModule(link_model).layout).all()), "the inner product has no parameters"


@pytest.mark.parametrize("name, shape, local", [("mclr", (2, 4, 4), {"classifier"}),
                                                 ("gru_seq2seq", (12, 2), {"decoder", "classifier"})])
def test_default_encoder_masks_of_sample_models(name, shape, local):
    model = build_model(name, shape, 3)
    flat = FlatModule(model)
    mask = model.encoder_mask(flat.layout)
    for entry in flat.layout.entries:
        assert bool(mask[entry.slice].all()) == (entry.name.split(".")[0] not in local), entry.name


def test_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match=r"node features of shape \(F,\)"):
        build_model("vgae", (1, 28, 28), 10)
    with pytest.raises(ValueError, match="hidden, out >= 1"):
        build_model("vgae", (6,), 3, out=0)


def test_the_readout_reads_mu_even_in_training_unless_asked_for_the_sample():
    graph = block_graph()
    torch.manual_seed(0)
    model = build_model("vgae", (graph.num_features,), 3)
    model.train()
    mu, _ = model.vgae.encoder(graph.x, graph.edge_index)
    assert torch.equal(model.features(graph), mu) and torch.equal(model(graph), model(graph)), "deterministic"
    sampled = build_model("vgae", (graph.num_features,), 3, readout_from="sample")
    sampled.load_state_dict(model.state_dict())
    sampled.train()
    assert not torch.equal(sampled.features(graph), mu)
    with pytest.raises(ValueError, match="readout_from must be one of"):
        build_model("vgae", (graph.num_features,), 3, readout_from="z")


def test_eq7_kl_weight_drops_kipfs_one_over_n():
    graph = block_graph()
    torch.manual_seed(0)
    per_node = build_model("vgae", (graph.num_features,), 0)
    eq7 = build_model("vgae", (graph.num_features,), 0, kl_weight="eq7")
    eq7.load_state_dict(per_node.state_dict())
    for model in (per_node, eq7):
        model.eval()
        model.features(graph)
    assert torch.allclose(eq7.auxiliary_loss(), per_node.auxiliary_loss() * graph.num_nodes)
    with pytest.raises(ValueError, match="kl_weight must be one of"):
        build_model("vgae", (graph.num_features,), 0, kl_weight="half")
