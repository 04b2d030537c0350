"""Figures shared by the paper notebooks: learning curves, per-client spreads, partitions, client graphs.

Every function draws into ``ax`` (a new figure's axes when None) and returns the Axes; nothing calls
``plt.show``. Methods (the ``hue`` column) are drawn in sorted order, so a method keeps its colour
across the figures of a notebook.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from torch import Tensor

from gflkit.data.partition import label_counts

LAYOUTS = {
    "spring": lambda graph, seed: nx.spring_layout(graph, seed=seed),
    "circular": lambda graph, seed: nx.circular_layout(graph),
    "kamada_kawai": lambda graph, seed: nx.kamada_kawai_layout(graph),
}


def _axes(ax: Axes | None) -> Axes:
    return plt.subplots()[1] if ax is None else ax


def _require(frame: pd.DataFrame, **columns: str) -> None:
    """Raise naming the parameter (``x``, ``hue``, ...) whose column is missing from ``frame``."""
    for parameter, column in columns.items():
        if column not in frame.columns:
            raise ValueError(f"{parameter} column {column!r} not in the data; columns are {list(frame.columns)}")


def _matrix(adjacency: Tensor | np.ndarray) -> np.ndarray:
    """A square adjacency as a float numpy array."""
    a = adjacency.detach().cpu().numpy() if isinstance(adjacency, Tensor) else np.asarray(adjacency)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be a square K x K matrix, got shape {a.shape}")
    return a.astype(np.float64)


def learning_curves(
    summary: pd.DataFrame,
    x: str = "round",
    y: str = "mean",
    hue: str = "method",
    seed_col: str = "seed",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """One line per ``hue`` value: the mean of ``y`` over seeds against ``x``, with a ±1 std band.

    ``summary`` holds one row per (hue, seed, x), e.g. ``summarize_records(records, by=["method",
    "seed", "round"])``; filter other configuration columns out first. The band is the sample standard
    deviation over seeds (absent with a single seed).
    """
    _require(summary, x=x, y=y, hue=hue)
    ax = _axes(ax)
    keys = [hue, x] + ([seed_col] if seed_col in summary.columns else [])
    if summary.duplicated(keys).any():
        raise ValueError(f"summary must hold one row per {keys}; filter the other configuration columns first")
    for value in sorted(summary[hue].unique()):
        stats = summary[summary[hue] == value].groupby(x)[y].agg(["mean", "std"])
        (line,) = ax.plot(stats.index, stats["mean"], label=str(value))
        ax.fill_between(stats.index, stats["mean"] - stats["std"], stats["mean"] + stats["std"],
                        color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(title=hue)
    if title is not None:
        ax.set_title(title)
    return ax


def client_distribution(
    records: pd.DataFrame, value: str = "accuracy", hue: str = "method", ax: Axes | None = None
) -> Axes:
    """Per-client distribution of ``value`` at the last round: a box and the individual clients per ``hue``.

    When ``records`` has a ``round`` column, only each ``hue`` group's last round is drawn; clients of
    several seeds are pooled. The points are jittered horizontally with a fixed seed.
    """
    _require(records, value=value, hue=hue)
    ax = _axes(ax)
    hues = sorted(records[hue].unique())
    if "round" in records.columns:
        records = records[records["round"] == records.groupby(hue)["round"].transform("max")]
    groups = [records.loc[records[hue] == h, value].to_numpy(dtype=float) for h in hues]
    positions = np.arange(1, len(hues) + 1)
    boxes = ax.boxplot(groups, positions=positions, widths=0.5, patch_artist=True, showfliers=False,
                       medianprops={"color": "black"})
    rng = np.random.default_rng(0)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (pos, group, box) in enumerate(zip(positions, groups, boxes["boxes"])):
        color = cycle[i % len(cycle)]
        box.set(facecolor=color, alpha=0.3)
        ax.scatter(pos + rng.uniform(-0.15, 0.15, len(group)), group, s=10, color=color, zorder=3)
    ax.set_xticks(positions, [str(h) for h in hues])
    ax.set_xlabel(hue)
    ax.set_ylabel(value)
    return ax


def adjacency_heatmap(
    adjacency: Tensor | np.ndarray,
    ax: Axes | None = None,
    labels: Sequence[str] | None = None,
    title: str | None = None,
    order: Sequence[int] | Tensor | np.ndarray | None = None,
) -> Axes:
    """The K x K client adjacency as an image with a colour bar.

    ``order`` is a permutation of the clients applied to rows and columns (e.g. ``argsort`` of the
    clients' dominant labels, so clusters appear as blocks); ``labels`` name the clients (in the
    original order) on both axes. Without ``labels`` the ticks are positions in the drawn order.
    """
    a = _matrix(adjacency)
    k = len(a)
    perm = np.arange(k) if order is None else np.asarray(order, dtype=np.int64)
    if sorted(perm.tolist()) != list(range(k)):
        raise ValueError(f"order must be a permutation of the {k} clients 0..{k - 1}")
    if labels is not None and len(labels) != k:
        raise ValueError(f"labels must name all {k} clients, got {len(labels)}")
    ax = _axes(ax)
    image = ax.imshow(a[np.ix_(perm, perm)], cmap="viridis", interpolation="nearest")
    ax.figure.colorbar(image, ax=ax)
    if labels is not None:
        names = [str(labels[i]) for i in perm]
        ax.set_xticks(range(k), names, rotation=90)
        ax.set_yticks(range(k), names)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("client")
    ax.set_ylabel("client")
    if title is not None:
        ax.set_title(title)
    return ax


def _node_colors(node_color: Tensor | np.ndarray | Sequence[float], k: int, ax: Axes) -> Any:
    """Colours for a per-client attribute: categories (integers) get a legend, reals a colour bar."""
    values = node_color.detach().cpu().numpy() if isinstance(node_color, Tensor) else np.asarray(node_color)
    if values.shape != (k,):
        raise ValueError(f"node_color must give one value per client ({k}), got shape {values.shape}")
    if np.issubdtype(values.dtype, np.integer) or values.dtype == bool:
        categories = np.unique(values)
        cmap = plt.get_cmap("tab10" if len(categories) <= 10 else "tab20")
        palette = {c: cmap(i % cmap.N) for i, c in enumerate(categories)}
        handles = [Line2D([], [], marker="o", linestyle="", color=palette[c], label=str(c)) for c in categories]
        ax.legend(handles=handles, fontsize="small")
        return [palette[v] for v in values]
    mappable = plt.cm.ScalarMappable(cmap="viridis", norm=plt.Normalize(values.min(), values.max()))
    ax.figure.colorbar(mappable, ax=ax)
    return [mappable.to_rgba(v) for v in values]


def draw_client_graph(
    adjacency: Tensor | np.ndarray,
    ax: Axes | None = None,
    node_color: Tensor | np.ndarray | Sequence[float] | None = None,
    threshold: float = 0.0,
    layout: str = "spring",
    seed: int = 0,
    labels: Sequence[str] | None = None,
    title: str | None = None,
    max_width: float = 3.0,
) -> Axes:
    r"""The client graph drawn with networkx.

    Edge :math:`(i, j)`, :math:`i \ne j`, is drawn when :math:`A_{ij} > \text{threshold}`, with width
    :math:`\text{max\_width} \cdot A_{ij} / \max A`. A symmetric ``adjacency`` gives an undirected
    graph (one segment per edge), otherwise a directed one. ``node_color`` is a per-client attribute:
    integers (e.g. dominant labels) are categories with a legend, reals use a colour bar. The
    ``layout`` (``spring``, ``circular``, ``kamada_kawai``) is deterministic for a ``seed``.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {sorted(LAYOUTS)}")
    a = _matrix(adjacency)
    k = len(a)
    if labels is not None and len(labels) != k:
        raise ValueError(f"labels must name all {k} clients, got {len(labels)}")
    ax = _axes(ax)
    graph = nx.Graph() if np.allclose(a, a.T) else nx.DiGraph()
    graph.add_nodes_from(range(k))
    rows, cols = np.nonzero((a > threshold) & ~np.eye(k, dtype=bool))
    graph.add_weighted_edges_from(
        (int(i), int(j), float(a[i, j])) for i, j in zip(rows, cols) if graph.is_directed() or i < j
    )
    weights = np.array([w for _, _, w in graph.edges(data="weight")])
    pos = LAYOUTS[layout](graph, seed)
    colors = "tab:blue" if node_color is None else _node_colors(node_color, k, ax)
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color=colors, node_size=80)
    if len(weights):
        nx.draw_networkx_edges(graph, pos, ax=ax, width=max_width * weights / weights.max(), alpha=0.6)
    if labels is not None:
        nx.draw_networkx_labels(graph, pos, {i: str(name) for i, name in enumerate(labels)}, ax=ax, font_size=8)
    ax.set_axis_off()
    if title is not None:
        ax.set_title(title)
    return ax


def label_distribution(labels: Tensor, parts: list[Tensor], num_classes: int, ax: Axes | None = None) -> Axes:
    r"""Stacked bars of each client's label counts (one bar per client, one colour per class).

    The bar of client ``k`` stacks :math:`|\{i \in \text{parts}[k] : y_i = c\}|` over the classes
    :math:`c`; the mix of colours per bar shows how heterogeneous the partition is.
    """
    ax = _axes(ax)
    counts = label_counts(labels, parts, num_classes).numpy()
    cmap = plt.get_cmap("tab10" if num_classes <= 10 else "tab20")
    clients = np.arange(len(parts))
    bottom = np.zeros(len(parts))
    for c in range(num_classes):
        ax.bar(clients, counts[:, c], bottom=bottom, width=0.9, color=cmap(c % cmap.N), label=str(c))
        bottom += counts[:, c]
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("client")
    ax.set_ylabel("samples")
    if num_classes <= 20:
        ax.legend(title="label", fontsize="small", ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


def seed_means(frame: pd.DataFrame, x: str = "method", y: str = "mean", seed: str = "seed",
               order: Sequence[str] | None = None, ax: Axes | None = None) -> Axes:
    """Each ``x`` category's per-seed values of ``y`` as dots (one per ``seed``, side by side, a colour per seed
    so that one seed's runs are seen together) and their mean as a horizontal bar: how far a rerun moves a
    number, next to the gaps between categories.

    ``order``: the categories from left to right (default: sorted); one absent from ``frame`` is skipped.
    """
    _require(frame, x=x, y=y, seed=seed)
    ax = _axes(ax)
    present = set(frame[x])
    categories = [c for c in (order if order is not None else sorted(present)) if c in present]
    seeds = sorted(frame[seed].unique())
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colours = {s: cycle[i % len(cycle)] for i, s in enumerate(seeds)}
    for position, category in enumerate(categories):
        runs = frame.loc[frame[x] == category].sort_values(seed)
        values = runs[y].to_numpy(dtype=np.float64)
        offsets = np.linspace(-0.2, 0.2, len(values)) if len(values) > 1 else np.zeros(1)
        ax.scatter(position + offsets, values, s=14, color=[colours[s] for s in runs[seed]], zorder=3)
        ax.plot([position - 0.3, position + 0.3], [values.mean()] * 2, color="black", linewidth=1.5)
    if len(seeds) > 1:
        ax.legend(handles=[Line2D([], [], marker="o", linestyle="", color=colours[s], markersize=4, label=str(s))
                           for s in seeds], title=seed, fontsize="x-small", title_fontsize="x-small",
                  loc="best")
    ax.set_xticks(range(len(categories)), [str(c) for c in categories], rotation=45, ha="right")
    ax.set_ylabel(y)
    return ax


def save_figure(fig: Figure, path: str | Path, dpi: int = 150) -> Path:
    """Save ``fig`` to ``path`` (format from the suffix, e.g. ``.png``) at ``dpi``, creating parent folders.

    The figure stays open; returns the path.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def critical_difference_diagram(
    average_ranks: pd.Series, cd: float, ax: Axes | None = None, title: str | None = None
) -> Axes:
    """Demšar's critical-difference diagram of methods' average ranks over several settings.

    ``average_ranks`` is indexed by method (e.g. :func:`gflkit.papers.ranking.average_ranks`), ``cd`` the
    critical difference (:func:`gflkit.papers.ranking.nemenyi_critical_difference`). The rank axis runs
    from 1 (best) on the **left** to the number of methods on the right. Each method hangs from its
    average rank by an elbow line to its name, the better half on the left, the worse half on the right,
    with the average rank written on the elbow. A bar of length ``cd`` labelled "CD" sits above the axis,
    and a thick bar joins each group of methods whose average ranks all lie within ``cd`` of each other
    (:func:`gflkit.papers.ranking.cd_groups`): methods not joined by a bar differ significantly.
    """
    from gflkit.papers.ranking import cd_groups

    if not isinstance(average_ranks, pd.Series) or average_ranks.empty:
        raise ValueError("average_ranks must be a non-empty Series indexed by method")
    ordered = average_ranks.astype(np.float64).sort_values(kind="stable")
    groups = cd_groups(ordered, cd)  # validates cd and the ranks
    names = [str(name) for name in ordered.index]
    values = ordered.to_numpy()
    k = max(len(values), int(np.ceil(values.max())))
    ax = _axes(ax)
    line = {"color": "black", "linewidth": 1.0}
    # rank axis at y = 0, ticks and numbers above it
    ax.plot([1, k], [0, 0], **line)
    for r in range(1, k + 1):
        ax.plot([r, r], [0, 0.1], **line)
        ax.text(r, 0.15, str(r), ha="center", va="bottom", fontsize="small")
    for r in np.arange(1.5, k):
        ax.plot([r, r], [0, 0.05], **line)
    # the CD bar above the numbers, starting at rank 1
    cd_y = 0.7
    ax.plot([1, 1 + cd], [cd_y, cd_y], **line)
    for end in (1, 1 + cd):
        ax.plot([end, end], [cd_y - 0.05, cd_y + 0.05], **line)
    ax.text(1 + cd / 2, cd_y + 0.08, "CD", ha="center", va="bottom", fontsize="small")
    # group bars just below the axis, one level per group
    level = 0.15
    for i, group in enumerate(groups):
        members = [values[names.index(name)] for name in group]
        y = -level * (i + 1)
        ax.plot([min(members) - 0.03, max(members) + 0.03], [y, y], color="black", linewidth=4.0,
                solid_capstyle="round")
    # elbow lines to the names: better half left (best on top), worse half right (worst on top)
    top = -level * (len(groups) + 1) - 0.2
    row = 0.3
    half = (len(values) + 1) // 2
    left = list(range(half))
    right = list(range(len(values) - 1, half - 1, -1))
    margin = 0.4
    for side, indices in (("left", left), ("right", right)):
        end_x = 1 - margin if side == "left" else k + margin
        for j, i in enumerate(indices):
            y = top - row * j
            ax.plot([values[i], values[i], end_x], [0, y, y], **line)
            ax.text(end_x + (-0.05 if side == "left" else 0.05), y, names[i], va="center",
                    ha="right" if side == "left" else "left")
            ax.text((values[i] + end_x) / 2, y + 0.03, f"{values[i]:.2f}", ha="center", va="bottom",
                    fontsize="x-small")
    bottom = top - row * max(len(left), len(right))
    ax.set_xlim(1 - 2.5 * margin, k + 2.5 * margin)
    ax.set_ylim(bottom, cd_y + 0.35)
    ax.set_axis_off()
    if title is not None:
        ax.set_title(title)
    return ax


__all__ = [
    "LAYOUTS",
    "adjacency_heatmap",
    "client_distribution",
    "critical_difference_diagram",
    "draw_client_graph",
    "label_distribution",
    "learning_curves",
    "paper_vs_measured",
    "save_figure",
]


def seed_means_by_setting(per_seed: pd.DataFrame, order: Sequence[str] | None = None,
                          settings: Sequence[str] | None = None,
                          ylabel: str = "mean client accuracy (%)") -> Figure:
    """:func:`seed_means` of each setting in its own panel, in at most two rows of panels (``per_seed``: columns
    ``method``, ``setting``, ``seed``, ``mean``; methods in ``order``, settings in ``settings``' order, default:
    as they appear; one absent from ``per_seed`` is skipped)."""
    _require(per_seed, setting="setting")
    present = list(dict.fromkeys(per_seed["setting"]))
    settings = [s for s in settings if s in present] if settings is not None else present
    rows = min(2, len(settings))
    columns = -(-len(settings) // rows)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 4 * rows), squeeze=False)
    for ax, setting in zip(axes.flat, settings):
        seed_means(per_seed[per_seed["setting"] == setting], order=order, ax=ax)
        ax.set_title(setting)
        ax.set_ylabel(ylabel)
    for ax in list(axes.flat)[len(settings):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def paper_vs_measured(table: pd.DataFrame, labels: Sequence[str], ax: Axes | None = None) -> Axes:
    """Each row of a paper-vs-measured table (columns ``measured`` and ``paper``, optionally ``measured_std``) as
    a line of the plot, named by its ``labels`` columns: the measured number as a dot (with ± its seed spread
    where the table has one) and the paper's as an open diamond, so the gaps and how they compare with a
    rerun's spread are read at a glance. A row without a paper number shows the measured dot alone."""
    _require(table, measured="measured", paper="paper")
    if table.empty:
        raise ValueError("paper_vs_measured needs at least one row")
    ax = _axes(ax)
    names = table[list(labels)].astype(str).agg(", ".join, axis=1).to_list() if labels else list(map(str, table.index))
    lines = np.arange(len(table))[::-1]
    spread = table["measured_std"].fillna(0).to_numpy(float) if "measured_std" in table else None
    ax.errorbar(table["measured"].to_numpy(float), lines, xerr=spread, fmt="o", color="tab:blue", markersize=4,
                capsize=2, label="measured" + (" (± seed std)" if spread is not None else ""))
    ax.scatter(table["paper"].to_numpy(float), lines, marker="D", facecolors="none", edgecolors="black", s=22,
               label="paper", zorder=3)
    ax.set_yticks(lines, names, fontsize="small")
    ax.set_ylim(-0.7, len(table) - 0.3)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize="small", loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, frameon=False)
    return ax


def critical_difference_panels(panels: dict[str, tuple[pd.Series, float]]) -> Figure:
    """One :func:`critical_difference_diagram` per panel, stacked (``panels``: title → (average ranks, CD)),
    e.g. each seed's ranking and their mean's."""
    if not panels:
        raise ValueError("critical_difference_panels needs at least one panel")
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 3.2 * len(panels)), squeeze=False)
    for ax, (title, (ranks, cd)) in zip(axes.flat, panels.items()):
        critical_difference_diagram(ranks, cd, ax=ax, title=title)
    fig.tight_layout()
    return fig
