"""Figures: each runs on small inputs (Agg backend) and draws the expected artists."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection, PolyCollection  # noqa: E402
from matplotlib.patches import PathPatch  # noqa: E402

from gflkit import plots  # noqa: E402
from gflkit.data.partition import label_counts, label_shards  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def per_round_summary(methods=("fedavg", "local", "fedprox"), seeds=(0, 1), rounds=5) -> pd.DataFrame:
    rows = [
        {"method": m, "seed": s, "round": r, "mean": 10.0 * i + r + s}
        for i, m in enumerate(methods) for s in seeds for r in range(1, rounds + 1)
    ]
    return pd.DataFrame(rows)


def test_learning_curves_one_line_and_band_per_method() -> None:
    ax = plots.learning_curves(per_round_summary(), title="curves")
    assert len(ax.get_lines()) == 3
    assert sum(isinstance(c, PolyCollection) for c in ax.collections) == 3
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fedavg", "fedprox", "local"]
    fedavg = ax.get_lines()[0]
    assert np.allclose(fedavg.get_xdata(), range(1, 6)) and np.allclose(fedavg.get_ydata(), np.arange(1, 6) + 0.5)
    assert ax.get_title() == "curves" and ax.get_xlabel() == "round"


def test_learning_curves_single_seed_and_duplicate_rows() -> None:
    ax = plots.learning_curves(per_round_summary(seeds=(0,)).drop(columns="seed"))
    assert len(ax.get_lines()) == 3
    with pytest.raises(ValueError, match="one row per"):
        plots.learning_curves(pd.concat([per_round_summary(), per_round_summary()]))
    with pytest.raises(ValueError, match="hue"):
        plots.learning_curves(per_round_summary(), hue="algorithm")


def test_client_distribution_box_and_points_per_method() -> None:
    rng = np.random.default_rng(0)
    records = pd.DataFrame(
        [{"method": m, "seed": 0, "round": r, "client": k, "accuracy": rng.uniform(0, 100)}
         for m in ("a", "b") for r in (1, 2) for k in range(8)]
    )
    fig, ax = plt.subplots()
    assert plots.client_distribution(records, ax=ax) is ax
    assert sum(isinstance(p, PathPatch) for p in ax.patches) == 2
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert [len(c.get_offsets()) for c in scatters] == [8, 8]  # last round only
    last_a = records.query("method == 'a' and round == 2")["accuracy"].to_numpy()
    assert np.allclose(np.sort(scatters[0].get_offsets()[:, 1]), np.sort(last_a))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]
    with pytest.raises(ValueError, match="value"):
        plots.client_distribution(records, value="auc")


def test_adjacency_heatmap_shape_order_and_colorbar() -> None:
    adjacency = torch.rand(6, 6)
    fig, ax = plt.subplots()
    order = [5, 4, 3, 2, 1, 0]
    plots.adjacency_heatmap(adjacency, ax=ax, labels=list("abcdef"), title="A", order=order)
    (image,) = ax.get_images()
    assert image.get_array().shape == (6, 6)
    assert np.allclose(image.get_array(), adjacency.numpy()[::-1, ::-1])
    assert len(fig.axes) == 2  # the heatmap and its colour bar
    assert [t.get_text() for t in ax.get_xticklabels()] == list("fedcba")
    with pytest.raises(ValueError, match="order"):
        plots.adjacency_heatmap(adjacency, order=[0, 0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="adjacency"):
        plots.adjacency_heatmap(np.zeros((2, 3)))


def symmetric_graph() -> np.ndarray:
    a = np.array(
        [[0.0, 0.9, 0.1, 0.0], [0.9, 0.0, 0.5, 0.2], [0.1, 0.5, 0.0, 0.7], [0.0, 0.2, 0.7, 0.0]]
    )
    return a + np.eye(4)  # self-loops are never drawn


def edge_segments(ax) -> int:
    return sum(len(c.get_segments()) for c in ax.collections if isinstance(c, LineCollection))


@pytest.mark.parametrize("threshold, edges", [(0.0, 5), (0.15, 4), (0.6, 2), (1.0, 0)])
def test_draw_client_graph_edges_above_threshold(threshold: float, edges: int) -> None:
    ax = plots.draw_client_graph(symmetric_graph(), threshold=threshold, node_color=np.array([0, 0, 1, 1]),
                                 labels=list("wxyz"), title="graph")
    assert edge_segments(ax) == edges
    assert len(ax.get_legend().get_texts()) == 2  # one entry per category
    assert len(ax.texts) == 4


def test_draw_client_graph_widths_and_deterministic_layout() -> None:
    fig, (left, right) = plt.subplots(1, 2)
    plots.draw_client_graph(torch.tensor(symmetric_graph()), ax=left, seed=3, node_color=torch.rand(4))
    plots.draw_client_graph(symmetric_graph(), ax=right, seed=3)
    nodes = [next(c for c in ax.collections if isinstance(c, PathCollection)).get_offsets() for ax in (left, right)]
    assert np.allclose(nodes[0], nodes[1])
    (edges,) = [c for c in left.collections if isinstance(c, LineCollection)]
    assert max(edges.get_linewidths()) == pytest.approx(3.0)
    assert len(fig.axes) == 3  # a colour bar for real-valued node colours


def test_draw_client_graph_directed_and_bad_parameters() -> None:
    a = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]])
    ax = plots.draw_client_graph(a, layout="circular")
    assert len(ax.patches) == 2  # one arrow per directed edge
    with pytest.raises(ValueError, match="layout"):
        plots.draw_client_graph(a, layout="spectral-ish")
    with pytest.raises(ValueError, match="node_color"):
        plots.draw_client_graph(a, node_color=[1, 2])
    with pytest.raises(ValueError, match="labels"):
        plots.draw_client_graph(a, labels=["x"])


def test_label_distribution_stacks_counts() -> None:
    labels = torch.arange(5).repeat_interleave(20)
    parts = label_shards(labels, 10, 1, seed=0)
    ax = plots.label_distribution(labels, parts, 5)
    assert len(ax.containers) == 5 and all(len(bars) == 10 for bars in ax.containers)
    heights = np.array([[bar.get_height() for bar in bars] for bars in ax.containers]).T
    assert np.array_equal(heights, label_counts(labels, parts, 5).numpy())


def test_save_figure_creates_parents(tmp_path) -> None:
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = plots.save_figure(fig, tmp_path / "a" / "b" / "figure.png")
    assert path.exists() and path.stat().st_size > 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.fignum_exists(fig.number)  # left open for the caller


def test_seed_means_one_dot_per_seed_and_a_mean_bar_per_category() -> None:
    frame = pd.DataFrame({"method": ["b", "b", "b", "a", "c"], "seed": [2, 0, 1, 0, 0],
                          "mean": [90.0, 92.0, 94.0, 80.0, 70.0]})
    ax = plots.seed_means(frame, order=["c", "b", "a", "absent"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["c", "b", "a"]
    dots = [collection.get_offsets() for collection in ax.collections]
    assert [len(d) for d in dots] == [1, 3, 1]
    assert dots[1][:, 1].tolist() == [92.0, 94.0, 90.0], "seeds in order, left to right"
    assert [line.get_ydata()[0] for line in ax.lines] == [70.0, 92.0, 80.0]
    with pytest.raises(ValueError, match="seed column 'run'"):
        plots.seed_means(frame, seed="run")
    plt.close("all")


def test_seed_means_colours_each_seed_alike_across_categories() -> None:
    frame = pd.DataFrame({"method": ["a", "a", "b", "b"], "seed": [0, 1, 1, 0], "mean": [1.0, 2.0, 3.0, 4.0]})
    ax = plots.seed_means(frame)
    a, b = (collection.get_facecolors() for collection in ax.collections)
    assert np.allclose(a, b), "seed 0 then seed 1 in both categories, the same colours"
    assert not np.allclose(a[0], a[1])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["0", "1"]


def test_seed_means_by_setting_one_panel_per_setting_in_at_most_two_rows() -> None:
    frame = pd.DataFrame({"setting": ["x", "y", "z"], "method": ["a"] * 3, "seed": [0] * 3, "mean": [1.0, 2, 3]})
    fig = plots.seed_means_by_setting(frame, ylabel="mean client auc")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["x", "y", "z"] and len(fig.axes) == 4
    assert visible[0].get_ylabel() == "mean client auc"
    assert len(plots.seed_means_by_setting(frame[:1]).axes) == 1


def test_paper_vs_measured_a_line_per_row_with_the_seed_spread() -> None:
    table = pd.DataFrame({"method": ["fedavg", "sfl", "new"], "measured": [90.0, 85.0, 70.0],
                          "measured_std": [1.0, 6.0, None], "paper": [91.0, 92.0, None]})
    ax = plots.paper_vs_measured(table, ["method"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["fedavg", "sfl", "new"]
    measured = ax.containers[0]
    assert measured.lines[0].get_xdata().tolist() == [90.0, 85.0, 70.0]
    assert measured.lines[0].get_ydata().tolist() == [2, 1, 0], "the first row on top"
    spread = measured.lines[2][0].get_segments()
    assert [segment[:, 0].tolist() for segment in spread] == [[89.0, 91.0], [79.0, 91.0], [70.0, 70.0]]
    paper = np.ma.filled(ax.collections[-1].get_offsets(), np.nan)
    assert paper[:2].tolist() == [[91.0, 2.0], [92.0, 1.0]] and np.isnan(paper[2, 0]), "no paper number, no diamond"
    with pytest.raises(ValueError, match="at least one row"):
        plots.paper_vs_measured(table[:0], ["method"])
    with pytest.raises(ValueError, match="paper column"):
        plots.paper_vs_measured(table.drop(columns="paper"), ["method"])
