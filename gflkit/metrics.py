r"""Per-client metrics and their summaries over clients, rounds and seeds.

A run's records are tidy: one row per (evaluated round, client) with at least the columns ``round``,
``client``, ``num_samples`` (the client's test samples) and the task's metric columns, plus
configuration columns (``method``, ``seed``, ``q``, ...). Metric columns: ``accuracy`` (in %) and
``loss`` for (node) classification; ``auc`` and ``ap`` (in %, as the VGAE paper reports them) and
``loss`` for link prediction; ``mae``, ``mape`` (in %), ``rmse`` and ``loss`` for forecasting. Every
summary below takes the metric's column name as ``value``.

Summaries over the :math:`K` clients' values :math:`v_1, \dots, v_K` with sample counts
:math:`n_1, \dots, n_K`:

* ``mean`` :math:`= \frac1K \sum_k v_k` (unweighted, as FedSKA's tables),
* ``weighted_mean`` :math:`= \sum_k n_k v_k / \sum_k n_k` (as FedSKA's code),
* ``best5`` / ``worst5``: the mean of the :math:`m = \lceil 0.05 K \rceil` largest / smallest values
  (FedSKA's "best 5 %" and "worst 5 %" of clients),
* ``std`` :math:`= \sqrt{\frac1K \sum_k (v_k - \bar v)^2}` (population standard deviation over clients).

A client with no test sample (``num_samples`` 0: e.g. 1,000 IID clients on 1,797 digits) has nothing to be
scored on: it is left out of every summary and counted apart (``num_unscored``), never averaged in as 0 %.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # the summaries read CSVs and frames; importing them must not import torch
    from torch import Tensor

SUMMARY_COLUMNS = ("mean", "weighted_mean", "best5", "worst5", "std")


def accuracy(logits: Tensor, targets: Tensor) -> float:
    r"""Top-1 accuracy in percent: :math:`100 \cdot \frac1n \sum_i [\arg\max_c z_{ic} = y_i]`.

    Args:
        logits: ``(n, C)`` scores.
        targets: ``(n,)`` class indices.
    """
    if logits.dim() != 2:
        raise ValueError(f"logits must have shape (n, C), got {tuple(logits.shape)}")
    if targets.shape != logits.shape[:1]:
        raise ValueError(f"targets must have shape ({logits.shape[0]},) to match logits, got {tuple(targets.shape)}")
    if len(targets) == 0:
        raise ValueError("logits and targets must hold at least one sample, got n = 0")
    return 100.0 * float((logits.argmax(dim=1) == targets).double().mean())


def _scores_and_labels(scores: Tensor, labels: Tensor) -> tuple[np.ndarray, np.ndarray] | None:
    """Scores and 0/1 labels as numpy arrays, or None when both classes are not present (metric undefined)."""
    if scores.shape != labels.shape or scores.dim() != 1:
        raise ValueError(f"scores and labels must be matching 1-D tensors, got {tuple(scores.shape)} and "
                         f"{tuple(labels.shape)}")
    labels_np = labels.detach().cpu().numpy()
    if not np.isin(labels_np, (0, 1)).all():
        raise ValueError("labels must be 0 (negative pair) or 1 (edge)")
    if len(np.unique(labels_np)) < 2:
        return None
    return scores.detach().cpu().double().numpy(), labels_np


def roc_auc(scores: Tensor, labels: Tensor) -> float:
    r"""Area under the ROC curve in percent (scikit-learn's ``roc_auc_score``).

    :math:`100 \cdot P(s_+ > s_-) + 50 \cdot P(s_+ = s_-)` for a random positive and a random negative
    pair. NaN when ``labels`` hold a single class (e.g. a client without held-out edges).
    """
    pair = _scores_and_labels(scores, labels)
    from sklearn.metrics import roc_auc_score  # scikit-learn takes a second to import; only link scores need it

    return math.nan if pair is None else 100.0 * float(roc_auc_score(pair[1], pair[0]))


def average_precision(scores: Tensor, labels: Tensor) -> float:
    r"""Average precision in percent (scikit-learn's ``average_precision_score``).

    :math:`100 \cdot \sum_n (R_n - R_{n-1}) P_n` over the score thresholds, with precision :math:`P_n` and
    recall :math:`R_n` at the n-th threshold. NaN when ``labels`` hold a single class.
    """
    pair = _scores_and_labels(scores, labels)
    from sklearn.metrics import average_precision_score

    return math.nan if pair is None else 100.0 * float(average_precision_score(pair[1], pair[0]))


def _values(values: Any, name: str = "values") -> np.ndarray:
    """Per-client values (list, numpy array, tensor, pandas Series) as a finite 1-D float64 array."""
    if hasattr(values, "detach"):  # a torch tensor, perhaps on a GPU or requiring grad
        values = values.detach().cpu().numpy()
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or len(array) == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of per-client numbers, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite, got {int((~np.isfinite(array)).sum())} NaN or infinite entries")
    return array


def _fraction_count(num_clients: int, fraction: float) -> int:
    r""":math:`\lceil \text{fraction} \cdot K \rceil` (robust to float round-off such as 0.05 · 60)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], got {fraction}")
    return math.ceil(round(fraction * num_clients, 9))


def best_fraction(values: Any, fraction: float = 0.05) -> float:
    r"""Mean of the :math:`\lceil \text{fraction} \cdot K \rceil` largest of the K per-client values.

    With the default 5 %, 20 clients give the single best client and 40 clients the mean of the top 2.
    """
    v = _values(values)
    return float(np.sort(v)[::-1][: _fraction_count(len(v), fraction)].mean())


def worst_fraction(values: Any, fraction: float = 0.05) -> float:
    r"""Mean of the :math:`\lceil \text{fraction} \cdot K \rceil` smallest of the K per-client values."""
    v = _values(values)
    return float(np.sort(v)[: _fraction_count(len(v), fraction)].mean())


def summarize_clients(values: Any, num_samples: Any = None, fraction: float = 0.05) -> dict[str, float]:
    r"""Summary of one set of per-client values (see the module docstring for the definitions).

    Args:
        values: the K clients' values (list, numpy array, tensor or pandas Series).
        num_samples: the clients' sample counts :math:`n_k \ge 0` for ``weighted_mean``; None weighs
            all clients equally. When all counts are 0, ``weighted_mean`` falls back to ``mean``.
        fraction: the share of clients in ``best5`` / ``worst5``.

    Returns:
        ``{"mean", "weighted_mean", "best5", "worst5", "std", "num_clients"}``.
    """
    v = _values(values)
    weights = np.ones_like(v) if num_samples is None else _values(num_samples, "num_samples")
    if weights.shape != v.shape:
        raise ValueError(f"num_samples must give one count per client: {len(weights)} counts for {len(v)} values")
    if (weights < 0).any():
        raise ValueError("num_samples must be non-negative")
    mean = float(v.mean())
    return {
        "mean": mean,
        "weighted_mean": float(np.average(v, weights=weights)) if weights.sum() > 0 else mean,
        "best5": best_fraction(v, fraction),
        "worst5": worst_fraction(v, fraction),
        "std": float(v.std()),
        "num_clients": len(v),
    }


def scored_rows(records: pd.DataFrame) -> pd.DataFrame:
    """The rows of clients that had something to be scored on: a test sample (``num_samples`` > 0; every row
    when the records carry no ``num_samples``)."""
    return records[records["num_samples"] > 0] if "num_samples" in records.columns else records


def _require_columns(records: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in records.columns]
    if missing:
        raise ValueError(f"records lack the columns {missing}; they have {list(records.columns)}")


def summarize_records(
    records: pd.DataFrame, value: str = "accuracy", by: Sequence[str] = ("round",), fraction: float = 0.05
) -> pd.DataFrame:
    """One :func:`summarize_clients` row per group of ``records``.

    Rows are grouped by the columns ``by`` (sorted by them; NaN keys kept as their own group); within a
    group, every row is one client's ``value``, weighted by ``num_samples`` when that column exists.
    Group the rows of one run and one round together, e.g. ``by=["method", "seed", "round"]``.

    Clients without a test sample (``num_samples`` 0) are left out and counted in ``num_unscored``; a group
    none of whose clients can be scored has NaN summaries.

    Returns:
        The ``by`` columns followed by ``mean``, ``weighted_mean``, ``best5``, ``worst5``, ``std``,
        ``num_clients`` (the clients scored) and ``num_unscored``; one row per group.
    """
    by = list(by)
    _require_columns(records, [value, *by])
    weighted = "num_samples" in records.columns
    rows = []
    for keys, group in records.groupby(by, sort=True, dropna=False):
        scored = scored_rows(group)
        summary = (summarize_clients(scored[value], scored["num_samples"] if weighted else None, fraction)
                   if len(scored) else {**dict.fromkeys(SUMMARY_COLUMNS, math.nan), "num_clients": 0})
        rows.append({**dict(zip(by, keys)), **summary, "num_unscored": len(group) - len(scored)})
    return pd.DataFrame(rows, columns=[*by, *SUMMARY_COLUMNS, "num_clients", "num_unscored"])


def held_out_rows(records: pd.DataFrame) -> pd.DataFrame:
    """The rows of the held-out (unseen) test clients of runs with ``RunConfig.held_out``.

    Their ``weighted_mean`` in :func:`summarize_records` / :func:`final_summary` is the global accuracy
    over the union of their samples — FedCG's and LEAF's reported metric.
    """
    if "held_out" not in records.columns:
        raise ValueError("these records have no held_out column: the runs held out no clients "
                         "(set RunConfig.held_out, e.g. 0.2)")
    return records[records["held_out"].astype(bool)]


#: which evaluated round of a run a table reports
REPORTS = ("last", "best_val")


def reported_rows(records: pd.DataFrame, runs: Sequence[str], report: str = "last",
                  select_by: str | None = None) -> pd.DataFrame:
    """The rows of the round each run reports; a run is a group of rows with equal ``runs`` values.

    ``report="last"``: its last evaluated round. ``report="best_val"``: the round whose mean over clients
    of ``val_<select_by>`` is highest (the first such round on ties) — the model early termination on
    the validation score keeps; ``select_by`` is a higher-is-better metric such as ``auc`` or
    ``accuracy``.
    """
    if report not in REPORTS:
        raise ValueError(f"unknown report {report!r}; choose one of {list(REPORTS)}")
    runs = list(runs)
    if report == "last":
        return records[records["round"] == records.groupby(runs, dropna=False)["round"].transform("max")]
    if select_by is None:
        raise ValueError("report='best_val' needs select_by, the validation metric to maximise (e.g. 'auc')")
    column = f"val_{select_by}"
    if column not in records.columns:
        raise ValueError(f"report='best_val' needs the validation column {column!r}, which these records lack "
                         f"(runs of a federation without a validation split, or stored before validation "
                         f"metrics were recorded: run them again); columns: {list(records.columns)}")
    per_round = records.groupby([*runs, "round"], dropna=False)[column].mean().reset_index()
    best = per_round.loc[per_round.groupby(runs, dropna=False)[column].idxmax(), [*runs, "round"]]
    return records.merge(best, on=[*runs, "round"])


def final_summary(
    records: pd.DataFrame,
    value: str = "accuracy",
    by: Sequence[str] = ("method",),
    seed_col: str = "seed",
    fraction: float = 0.05,
    report: str = "last",
    select_by: str | None = None,
) -> pd.DataFrame:
    r"""The table of a grid of runs: the summary at each run's reported round, averaged over seeds.

    1. A run is a group of rows with equal ``by`` and ``seed_col`` values. Only the rows of its reported
       round are kept (:func:`reported_rows`: by default its last evaluated round; ``report="best_val"``:
       its best round by the validation metric ``select_by``, ``value`` itself by default).
    2. Those rows are summarised over clients (:func:`summarize_records`), giving one summary per run.
    3. Per ``by`` group, every summary column ``s`` becomes the mean over seeds (column ``s``) and the
       sample standard deviation over seeds (column ``s_std``, ddof = 1; NaN for a single seed).

    Returns:
        The ``by`` columns, then ``mean``, ``mean_std``, ``weighted_mean``, ``weighted_mean_std``,
        ``best5``, ``best5_std``, ``worst5``, ``worst5_std``, ``std``, ``std_std`` and ``num_seeds``;
        one row per ``by`` group, sorted by it. Where some run has clients without a test sample, also
        ``scored``: ``"N of K clients"`` (the fewest scored of any seed), so such a table says so.
    """
    by = list(by)
    _require_columns(records, [value, "round", seed_col, *by])
    runs = [*by, seed_col]
    reported = reported_rows(records, runs, report, select_by or value)
    per_run = summarize_records(reported, value, runs, fraction)
    grouped = per_run.groupby(by, sort=True, dropna=False)[list(SUMMARY_COLUMNS)]
    table = pd.concat([grouped.mean(), grouped.std(ddof=1).add_suffix("_std")], axis=1)
    table = table[[f"{c}{suffix}" for c in SUMMARY_COLUMNS for suffix in ("", "_std")]]
    table["num_seeds"] = per_run.groupby(by, sort=True, dropna=False)[seed_col].nunique()
    if per_run["num_unscored"].any():
        counts = per_run.assign(total=per_run["num_clients"] + per_run["num_unscored"])
        fewest = counts.loc[counts.groupby(by, sort=True, dropna=False)["num_clients"].idxmin()].set_index(by)
        table["scored"] = [f"{row.num_clients} of {row.total} clients" for row in fewest.itertuples()]
    return table.reset_index()


def long_summary(summary: pd.DataFrame, by: Sequence[str],
                 columns: Sequence[str] = ("mean", "best5", "worst5")) -> pd.DataFrame:
    """A :func:`final_summary` table in long form for :func:`gflkit.papers.paper_vs_measured`: one row per
    ``by`` group and summary column, with ``metric`` (the column's name), ``value`` (its mean over seeds),
    ``std`` (its standard deviation over seeds, NaN for one seed) and ``seeds`` (how many)."""
    by = list(by)
    _require_columns(summary, [*by, *columns, *(f"{c}_std" for c in columns), "num_seeds"])
    parts = [summary[by].assign(metric=c, value=summary[c], std=summary[f"{c}_std"], seeds=summary["num_seeds"])
             for c in columns]
    return pd.concat(parts, ignore_index=True)


def mean_and_spread(value: float, std: float, seeds: int, decimals: int = 2) -> str:
    """``97.45 ± 0.12 (3 seeds)``, or ``97.45 (1 seed)`` where one seed has no spread."""
    if seeds < 2 or pd.isna(std):
        return f"{value:.{decimals}f} ({seeds} seed{'s' if seeds != 1 else ''})"
    return f"{value:.{decimals}f} ± {std:.{decimals}f} ({seeds} seeds)"


PROTOCOLS = ("server", "local")


def with_both_protocols(records: pd.DataFrame, value: str = "accuracy") -> pd.DataFrame:
    """``records`` with ``<value>_server`` and ``<value>_local`` both filled in.

    Each run's records hold ``value`` under its own protocol (column ``evaluate``) and the other
    protocol's under ``<value>_<other>`` (see :mod:`gflkit.engine`); this puts both under their names.
    """
    _require_columns(records, [value, "evaluate"])
    out = records.copy()
    for protocol in PROTOCOLS:
        column = f"{value}_{protocol}"
        own = out["evaluate"] == protocol
        out[column] = out[value].where(own, out[column] if column in out else float("nan"))
    return out


def protocol_table(records: pd.DataFrame, value: str = "accuracy", by: Sequence[str] = ("method",),
                   threshold: float = 1.0) -> pd.DataFrame:
    """Per ``by`` group: the protocol that ran (``protocol``), the final mean over clients under each
    protocol (columns ``server`` and ``local``, averaged over seeds) and ``differs``: whether they are
    more than ``threshold`` points apart — where a table should show the other protocol too."""
    by = list(by)
    both = with_both_protocols(records, value)
    means = [final_summary(both, f"{value}_{p}", by)[[*by, "mean"]].rename(columns={"mean": p}) for p in PROTOCOLS]
    protocols = records.groupby(by, sort=True)["evaluate"].agg(lambda x: "/".join(sorted(set(x))))
    table = protocols.rename("protocol").reset_index().merge(means[0], on=by).merge(means[1], on=by)
    table["differs"] = (table["server"] - table["local"]).abs() > threshold
    return table


def identical_methods(records: pd.DataFrame, value: str = "accuracy", by: Sequence[str] = (),
                      method_col: str = "method") -> pd.DataFrame:
    """Pairs of methods whose final per-client ``value`` are equal for every client and seed, per ``by``
    group: a column that silently equals another method's (a clustering that never split, a generator
    that generated nothing) is a defect to show, not a result. Returns ``by`` columns, ``method`` and
    ``same_as``; empty when every method differs somewhere."""
    by = list(by)
    _require_columns(records, [value, "round", "client", "seed", method_col, *by])
    last = records[records["round"] == records.groupby([*by, method_col, "seed"])["round"].transform("max")]
    pairs = []
    for key, group in (last.groupby(by, sort=True) if by else [((), last)]):
        finals = group.pivot_table(index=["seed", "client"], columns=method_col, values=value)
        methods = list(finals.columns)
        for i, first in enumerate(methods):
            for second in methods[i + 1:]:
                if finals[first].equals(finals[second]):
                    pairs.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))),
                                  "method": first, "same_as": second})
    return pd.DataFrame(pairs, columns=[*by, "method", "same_as"])


__all__ = [
    "PROTOCOLS",
    "SUMMARY_COLUMNS",
    "accuracy",
    "average_precision",
    "best_fraction",
    "final_summary",
    "held_out_rows",
    "reported_rows",
    "REPORTS",
    "identical_methods",
    "protocol_table",
    "with_both_protocols",
    "roc_auc",
    "summarize_clients",
    "summarize_records",
    "worst_fraction",
]
