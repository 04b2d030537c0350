import pytest
import torch

from gflkit.graphs.adjacency import cosine_similarity_matrix, knn_sparsify, row_normalize, sym_normalize, symmetrize


def test_cosine_similarity_matrix_hand_case():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    s = cosine_similarity_matrix(x)
    expected = torch.tensor([[1.0, 0.0, 0.5**0.5], [0.0, 1.0, 0.5**0.5], [0.5**0.5, 0.5**0.5, 1.0]])
    assert torch.allclose(s, expected, atol=1e-6)


def test_knn_keeps_exactly_k_plus_one_per_row_self_included():
    torch.manual_seed(0)
    s = torch.rand(7, 7) + 0.1
    s.fill_diagonal_(0.0)  # self must be kept even when it is the row's smallest entry
    sparse = knn_sparsify(s, k=3, keep_self=True)
    kept = (sparse != 0) | torch.eye(7, dtype=torch.bool)
    assert (kept.sum(dim=1) == 4).all()
    for i in range(7):
        others = [j for j in range(7) if j != i]
        top3 = sorted(others, key=lambda j: -s[i, j])[:3]
        assert set(torch.nonzero(kept[i]).flatten().tolist()) == set(top3) | {i}
        assert torch.equal(sparse[i, top3], s[i, top3])


def test_knn_without_self_keeps_k_and_rejects_bad_k():
    s = torch.arange(16.0).view(4, 4)
    assert ((knn_sparsify(s, 2, keep_self=False) != 0).sum(1) == 2).all()
    with pytest.raises(ValueError, match="k must satisfy"):
        knn_sparsify(s, 4, keep_self=True)
    with pytest.raises(ValueError, match="k must satisfy"):
        knn_sparsify(s, 0, keep_self=False)


def test_sym_normalize_matches_d_half_s_d_half():
    s = torch.tensor([[1.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 3.0]])
    d = s.sum(1)
    expected = torch.diag(d.rsqrt()) @ s @ torch.diag(d.rsqrt())
    assert torch.allclose(sym_normalize(s), expected)
    assert torch.equal(sym_normalize(torch.zeros(2, 2)), torch.zeros(2, 2)), "isolated nodes stay zero"


def test_symmetrize_and_row_normalize():
    s = torch.tensor([[0.0, 2.0], [0.0, 1.0]])
    assert torch.equal(symmetrize(s), torch.tensor([[0.0, 1.0], [1.0, 1.0]]))
    assert torch.allclose(row_normalize(torch.tensor([[1.0, 3.0], [0.0, 0.0]])), torch.tensor([[0.25, 0.75], [0.0, 0.0]]))
