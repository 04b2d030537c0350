"""Client graphs: dense adjacency utilities and the given (side-information) client graph."""
from gflkit.graphs.adjacency import cosine_similarity_matrix, knn_sparsify, row_normalize, sym_normalize, symmetrize
from gflkit.graphs.gcn import DenseGCN, DenseGraphConv
from gflkit.graphs.structure_learner import MetricGenerator, StructureLearner
from gflkit.graphs.given import GIVEN_GRAPHS, GivenGraphOptions, given_graph, label_sharing_graph, top_label_mask

__all__ = [
    "cosine_similarity_matrix",
    "knn_sparsify",
    "row_normalize",
    "sym_normalize",
    "symmetrize",
    "GIVEN_GRAPHS",
    "GivenGraphOptions",
    "given_graph",
    "label_sharing_graph",
    "top_label_mask",
    "DenseGCN",
    "DenseGraphConv",
    "MetricGenerator",
    "StructureLearner",
]
