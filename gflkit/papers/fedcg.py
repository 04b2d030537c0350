"""Profiles, variants and grids of the FedCG notebook (Tables 2, 4 and 5, the λ values, the domains).

Paper protocol (Sec. 4.1, NOTES.md), LEAF's: one client per CelebA celebrity (≥ 5 images; task: smiling)
or FEMNIST writer; the global model is scored on **unseen test clients**, accuracy over the union of
their images (``RunConfig.held_out``, :func:`gflkit.metrics.held_out_rows`). CelebA: LEAF CNN, 100 rounds
of 10 clients, one local epoch, batch 5, lr 10⁻³; FEMNIST: LEAF CNN (``mcmahan_cnn`` with a 2,048-unit
hidden layer), 1,000 rounds of 5 clients, batch 10, lr 10⁻³. FedCG: domain residuals on the last
convolution, D = 4 discovered domains, soft test-time domains, A initialised as the identity; a 1-layer
GCN on CelebA, a 2-layer GCN with a /16 bottleneck on FEMNIST. SGD without momentum throughout (LEAF's
optimiser; the paper names none).

**What the offline data change.** LEAF holds out whole clients: CelebA trains on 10 % of the celebrities
and tests on a separate 20 %, FEMNIST splits writers 60 / 20 / 20 (train / validation / test). The offline
copies hold 104 celebrities with images (554 images) and 105 FEMNIST writers, so every client present is
used and the paper's train : test ratio is kept: 2/3 of the celebrities are test clients (10 : 20), a
quarter of the writers (60 : 20; validation writers are not used by any reported number). Training
clients train on all their images (CelebA) or their LEAF training samples (FEMNIST). Images are scaled to
[0, 1] (``scale="unit"``): FedCG's implementation is PyTorch, whose image pipelines scale so; LEAF's
TensorFlow model feeds 0–255.

**Table 3's oracle domains.** Each CelebA image's domain is its code over the five attributes of Sec. 4.2.1
(32 domains), handed to the network as a fourth, constant input channel (CelebA's ``domain_channel``)
that FedCG's network reads and removes (``domains="oracle"``), in training and at test time. A is fixed
(U: uniform, H: Eq. 6 with inverse Hamming distances, :func:`~gflkit.models.fedcg.initial_adjacency`);
the domain layers are all convolutions (Table 4 introduces last-layer-only as a new test, so Table 3's
model is read as the all-layer one — the paper does not say). "Domain-specific models" is approximated by
identity A with domain convolutions only (no domain-agnostic part, no W): every domain has its own
convolutions, but BatchNorm and the classifier stay shared, where the paper's models are fully separate.

**Table 4's K-means rows** cluster the training clients by models trained apart (before round 1) and give
each client's images its cluster's domain; the student learns the clusters and assigns the unseen test
clients' images (hard), see :mod:`gflkit.algorithms.fedcg` for the reading and what it adds to the paper.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from gflkit.experiment import Run
from gflkit.papers import Claim, check_claim, paper_vs_measured, reported, standing
from gflkit.papers.comparison import (Difference, against_every_candidate, best_other, difference_noise,
                                      held_out_difference, side_label)
from gflkit.profiles import Profile, chosen_sections
from gflkit.runtime import Runtime

#: Table label → (method, method options); FedCG's network is chosen per dataset (:data:`FEDCG_MODEL`).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "fedavg": ("fedavg", {}),
    "fedcg": ("fedcg", {}),
    "fedcg_argmax": ("fedcg", {}),
    "fedcg_student_lr": ("fedcg", {}),
    "fedprox": ("fedprox", {}),
    "scaffold": ("scaffold", {}),
}
#: FedCG variants that differ in the network (:class:`~gflkit.models.fedcg.FedCGNet`), shown beside the
#: centred default: the paper's literal arg-max pseudo-labels, which collapse to one domain, and the student
#: at the network's learning rate (10⁻³; the paper's 10⁻⁴ leaves it near uniform after 100 CelebA rounds).
FEDCG_VARIANT_MODEL = {"fedcg": {}, "fedcg_argmax": {"pseudo_labels": "argmax"},
                       "fedcg_student_lr": {"student_weight": 1.0}}
LABELS = {"fedavg": "FedAvg", "fedcg": "FedCG", "fedcg_argmax": "FedCG (literal arg-max)",
          "fedcg_student_lr": "FedCG (student lr 10⁻³)", "fedprox": "FedProx", "scaffold": "SCAFFOLD"}
SECTIONS = ("table5", "table4", "table3")
#: the five attributes of the paper's oracle domains (Sec. 4.2.1), and the task's
DOMAIN_ATTRIBUTES = ("Attractive", "Heavy_Makeup", "High_Cheekbones", "Mouth_Slightly_Open", "Wavy_Hair", "Smiling")

#: Per dataset, the run fields of the paper's protocol (on the clients present offline, see above).
DATASETS: dict[str, dict[str, Any]] = {
    "celeba": dict(dataset="celeba", model="leaf_celeba_cnn", model_options={}, data_options={"scale": "unit"},
                   held_out=2 / 3, batch_size=5, rounds=100, clients_per_round=10, eval_every=10),
    "femnist": dict(dataset="femnist", model="mcmahan_cnn", model_options={"hidden": 2048}, data_options={},
                    held_out=0.25, batch_size=10, rounds=1000, clients_per_round=5, eval_every=50),
    # the smoke profile's embedded stand-in (no users: 20 IID clients, a quarter held out)
    "digits": dict(dataset="digits", model="simple_cnn", model_options={}, data_options={}, partition="iid",
                   num_clients=20, test_ratio=0.2, held_out=0.25, batch_size=16, lr=0.3, rounds=6,
                   clients_per_round=10, eval_every=3),
}
#: FedCG's network per dataset (Sec. 4.1 / 4.3 — last layer, D = 4, soft domains, A = I at first).
FEDCG_MODEL: dict[str, dict[str, Any]] = {
    "celeba": dict(base="leaf_celeba_cnn", num_domains=4, layers="last", gcn_layers=1, reduction=1,
                   pseudo_labels="centred"),
    "femnist": dict(base="mcmahan_cnn", base_options={"hidden": 2048}, num_domains=4, layers="last", gcn_layers=2,
                    reduction=16, pseudo_labels="centred"),
    "digits": dict(base="simple_cnn", num_domains=4, layers="last", gcn_layers=1, reduction=1, pseudo_labels="centred"),
}
#: Table 4's rows — (FedCG layers, A init, clusters, D, test-time domains); clusters are the teacher /
#: student classifier's (``"clf"``) or K-means of separately trained client models (``"kmeans"``).
TABLE4 = (("all", "eye", "kmeans", 2, "hard"), ("all", "eye", "kmeans", 3, "hard"), ("all", "eye", "kmeans", 4, "hard"),
          ("all", "eye", "clf", 2, "hard"), ("all", "eye", "clf", 3, "hard"), ("all", "eye", "clf", 4, "hard"),
          ("all", "random", "clf", 2, "hard"), ("all", "random", "clf", 3, "hard"), ("all", "random", "clf", 4, "hard"),
          ("all", "eye", "clf", 2, "soft"), ("all", "eye", "clf", 3, "soft"), ("all", "eye", "clf", 4, "soft"),
          ("last", "eye", "clf", 2, "soft"), ("last", "eye", "clf", 3, "soft"), ("last", "eye", "clf", 4, "soft"),
          ("last", "eye", "clf", 32, "soft"))
CLUSTERS = ("clf", "kmeans")

#: Table 3 (oracle domains) — row key (as in ``fedcg.csv``) → the FedCG network's options of that row.
TABLE3: dict[str, dict[str, Any]] = {
    "domain_models": dict(residual=False, adjacency_init="eye", projection=False, activation="none"),
    **{f"gcn_{a}{'_W' if w else ''}": dict(residual=False, adjacency_init=init, projection=w, activation="none")
       for w in (False, True) for a, init in (("U", "uniform"), ("H", "hamming"))},
    **{f"fedcg_{a}_W{'_relu' if relu else ''}": dict(residual=True, adjacency_init=init, projection=True,
                                                     activation="relu" if relu else "none")
       for relu in (False, True) for a, init in (("U", "uniform"), ("H", "hamming"))},
}
#: what every Table 3 row shares — the 32 oracle attribute domains on every convolution, a fixed A
ORACLE_MODEL = dict(domains="oracle", num_domains=2 ** 5, layers="all")

BASE = dict(partition="natural", partition_options={}, test_ratio=None, local_epochs=1, lr=1e-3, momentum=0.0,
            optimizer="sgd", evaluate="server")

PROFILES = {
    # scikit-learn's digits (8 × 8), 20 IID clients, a small CNN, 6 rounds: the whole notebook in about a minute.
    "smoke": Profile("smoke", base=dict(BASE, **DATASETS["digits"]),
                     sweep={"datasets": ("digits",), "table5": tuple(VARIANTS),
                            "table4": (("all", "eye", "kmeans", 2, "hard"), ("all", "eye", "clf", 2, "hard"),
                                       ("last", "eye", "clf", 2, "soft"), ("last", "eye", "clf", 4, "soft")),
                            "table3": ()}),  # digits have no attributes
    # The offline CelebA celebrities for half the paper's rounds, FEMNIST's 105 writers for 20 of its 1,000
    # rounds, five rows of Table 4 (one with K-means clusters): the whole notebook in about 15 minutes on 2 cores.
    "ci": Profile("ci", base=dict(BASE, **DATASETS["celeba"]), required=("celeba", "femnist"),
                  sweep={"datasets": ("celeba", "femnist"), "table5": tuple(VARIANTS),
                         "table4": (("all", "eye", "kmeans", 4, "hard"), ("all", "eye", "clf", 4, "hard"),
                                    ("all", "random", "clf", 4, "hard"), ("last", "eye", "clf", 2, "soft"),
                                    ("last", "eye", "clf", 4, "soft")),
                         "table3": ("domain_models", "gcn_U_W", "gcn_H_W", "fedcg_U_W_relu", "fedcg_H_W_relu"),
                         "celeba_rounds": (50,), "femnist_rounds": (20,)}),
    # The paper's schedule on every dataset (one seed: the paper reports one number per cell).
    "paper": Profile("paper", base=dict(BASE, **DATASETS["celeba"]), required=("celeba", "femnist"),
                     sweep={"datasets": ("celeba", "femnist"), "table5": tuple(VARIANTS), "table4": TABLE4,
                            "table3": tuple(TABLE3), "femnist_rounds": (1000,)}),
}

_MISSING = object()


def _overridden(params: Profile) -> dict[str, Any]:
    """The base fields a notebook overrode (they hold for every dataset)."""
    original = PROFILES[params.name].base
    return {k: v for k, v in params.base.items() if original.get(k, _MISSING) != v}


def dataset_fields(params: Profile, dataset: str) -> dict[str, Any]:
    """The run fields of ``dataset`` under this profile: the paper's protocol (:data:`DATASETS`), the
    profile's ``<dataset>_rounds`` sweep entry (a reduced schedule), then anything the notebook overrode."""
    if dataset not in DATASETS:
        raise ValueError(f"unknown FedCG dataset {dataset!r}; choose from {sorted(DATASETS)}")
    fields = dict(DATASETS[dataset])
    if f"{dataset}_rounds" in params.sweep:
        fields["rounds"] = params.sweep[f"{dataset}_rounds"][0]
        fields["eval_every"] = min(fields["eval_every"], fields["rounds"])
    return {**fields, **_overridden(params)}


def variant_config(params: Profile, label: str, dataset: str, seed: int, **model_changes: Any):
    """The run of table variant ``label`` on ``dataset`` with ``seed``; FedCG's network takes ``model_changes``
    (Table 4's layers / A init / D / test-time domains)."""
    if label not in VARIANTS:
        raise ValueError(f"unknown variant {label!r}; choose from {sorted(VARIANTS)}")
    method, options = VARIANTS[label]
    fields = dataset_fields(params, dataset)
    if method == "fedcg":
        fields["model"] = "fedcg"
        fields["model_options"] = {**FEDCG_MODEL[dataset], **FEDCG_VARIANT_MODEL[label], **model_changes}
    elif model_changes:
        raise ValueError(f"only FedCG's network takes model changes, not {label!r}")
    return params.config(method=method, method_options=dict(options), seed=seed, **fields)


def table4_setting(layers: str, init: str, clusters: str, domains: int, test_domains: str) -> str:
    """A Table 4 row's key, as in ``fedcg.csv``: ``<layers>-<A init>-<clf|kmeans>-<D>-<soft|hard>``."""
    return f"{layers}-{init}-{clusters}-{domains}-{test_domains}"


def table4_config(params: Profile, row: Sequence[Any], seed: int):
    """Table 4's FedCG run ``row`` = (layers, A init, clusters, D, test-time domains) on CelebA (the profile's
    first dataset); K-means rows run ``fedcg_kmeans``, which assigns each client its cluster (``domains="assigned"``)."""
    layers, init, clusters, domains, test_domains = row
    if clusters not in CLUSTERS:
        raise ValueError(f"unknown Table 4 clusters {clusters!r}; choose from {list(CLUSTERS)}")
    kmeans = {"domains": "assigned"} if clusters == "kmeans" else {}
    config = variant_config(params, "fedcg", params.sweep["datasets"][0], seed, layers=layers, adjacency_init=init,
                            num_domains=domains, test_domains=test_domains, **kmeans)
    return config.replace(method="fedcg_kmeans") if kmeans else config


def table3_config(params: Profile, row: str, seed: int):
    """Table 3's run ``row`` (a :data:`TABLE3` key): FedCG with the 32 oracle attribute domains on CelebA,
    A fixed (the server does not recompute it)."""
    if row not in TABLE3:
        raise ValueError(f"unknown Table 3 row {row!r}; choose from {list(TABLE3)}")
    fields = dataset_fields(params, "celeba")
    fields["data_options"] = {**fields["data_options"], "domain_channel": list(DOMAIN_ATTRIBUTES[:5])}
    fields["model"] = "fedcg"
    fields["model_options"] = {**FEDCG_MODEL["celeba"], **ORACLE_MODEL, **TABLE3[row]}
    return params.config(method="fedcg", method_options={"adjacency": "fixed"}, seed=seed, **fields)


def fedcg_setting(model_options: dict[str, Any]) -> str:
    """The Table 4 setting (:func:`table4_setting`) a FedCG network's options describe."""
    o = model_options
    clusters = "kmeans" if o.get("domains") == "assigned" else "clf"
    return table4_setting(o["layers"], o.get("adjacency_init", "eye"), clusters, o["num_domains"],
                          o.get("test_domains", "soft"))


def variant_run(params: Profile, label: str, dataset: str, seed: int) -> Run:
    """:func:`variant_config` labelled with its ``dataset`` and ``variant`` and, for FedCG's network, the Table 4
    ``setting`` its options describe."""
    config = variant_config(params, label, dataset, seed)
    labels = {"dataset": dataset, "variant": label}
    if config.model == "fedcg":
        labels["setting"] = fedcg_setting(config.model_options)
    return Run(config, labels)


def table4_run(params: Profile, row: Sequence[Any], seed: int) -> Run:
    """:func:`table4_config` labelled as a FedCG run (``variant``) with its Table 4 ``setting``."""
    config = table4_config(params, row, seed)
    return Run(config, {"dataset": config.dataset, "variant": "fedcg", "setting": fedcg_setting(config.model_options)})


def table3_run(params: Profile, row: str, seed: int) -> Run:
    """:func:`table3_config` labelled ``variant`` ``table3`` with its ``setting``, the row."""
    config = table3_config(params, row, seed)
    return Run(config, {"dataset": config.dataset, "variant": "table3", "setting": row})


def grids(params: Profile, sections: Sequence[str] | None = None, runtime: Runtime | None = None) -> dict[str, list[Run]]:
    """The runs of each section (``gflkit precompute fedcg``): Table 5 (every variant on every dataset;
    its FedAvg runs are Table 2's), Table 4 (FedCG's clustering and layer ablation on CelebA) and Table 3
    (oracle attribute domains on CelebA); the same wherever they compute (``runtime``)."""
    chosen = chosen_sections(sections, SECTIONS)
    makers = {
        "table5": lambda: [variant_run(params, v, d, s) for d in params.sweep["datasets"] for s in params.seeds
                           for v in params.sweep["table5"]],
        "table4": lambda: [table4_run(params, row, s) for s in params.seeds for row in params.sweep["table4"]],
        "table3": lambda: [table3_run(params, row, s) for s in params.seeds for row in params.sweep["table3"]],
    }
    return {section: makers[section]() for section in chosen}


def held_out_accuracy(records: Any, by: Sequence[str] = ("dataset", "variant")) -> Any:
    """Per ``by`` group: the accuracy over the union of the unseen test clients' images at each run's last
    round (the paper's metric), averaged over seeds (columns ``accuracy``, ``accuracy_std``, ... of
    :func:`gflkit.metrics.final_summary`)."""
    from gflkit import metrics

    table = metrics.final_summary(metrics.held_out_rows(records), value="accuracy", by=by)
    return table.rename(columns={"weighted_mean": "accuracy", "weighted_mean_std": "accuracy_std"})


def domain_probabilities(config: Any, runtime: Any) -> tuple[Any, Any]:
    """The student's domain probabilities ``(N, D)`` for every image of ``config``'s dataset (under ``runtime``'s
    data root), with the final global model of the FedCG run ``config`` in ``runtime``'s store (stored under its
    device type); returns them and the dataset (on the CPU)."""
    import torch

    from gflkit.data import load_dataset
    from gflkit.experiment import stored_artifacts
    from gflkit.models import build_model
    from gflkit.state import FlatModule

    data = load_dataset(config.dataset, root=runtime.data_root, **config.data_options)
    model = build_model(config.model, data.input_shape, data.num_classes, **config.model_options)
    flat = FlatModule(model)
    flat.load(stored_artifacts(config, runtime)["global_model"].cpu())
    model.eval()
    with torch.no_grad():
        probabilities = torch.cat([torch.softmax(model.student(batch), dim=1) for batch in data.x.split(1024)])
    return probabilities, data


def domains_against_attributes(domains: Any, attributes: Any, names: Sequence[str]) -> Any:
    """Per discovered domain: its share of the images and the fraction of its images with each attribute
    (a ``DataFrame``, one row per domain). A domain that means something stands out in some column."""
    import pandas as pd

    rows = []
    for d in range(int(domains.max()) + 1):
        chosen = domains == d
        rows.append({"domain": d, "images": int(chosen.sum()),
                     **{name: float(attributes[chosen, i].float().mean()) if chosen.any() else float("nan")
                        for i, name in enumerate(names)}})
    return pd.DataFrame(rows).set_index("domain")


def label_given_domain(domains: Any, labels: Any) -> float:
    """Accuracy (%) of predicting each image's label by the majority label of its domain: how much the
    domains alone tell about the task (50 % for binary domains unrelated to a balanced label)."""
    import torch

    correct = 0
    for d in domains.unique().tolist():
        chosen = labels[domains == d]
        correct += int(torch.bincount(chosen).max())
    return 100.0 * correct / len(labels)


def cluster_summary(client_domains: Any, test_domains: Any, num_domains: int) -> dict[str, Any]:
    """A K-means row's domains: training clients per K-means cluster (``client_domains``, ``-1`` = held out)
    and the unseen test clients' images per domain the student gives them (``test_domains``). One
    non-empty domain on the test side means the student learnt a constant: every test image gets the same
    residual branch."""
    import torch

    clients = torch.bincount(client_domains[client_domains >= 0], minlength=num_domains)
    images = torch.bincount(test_domains, minlength=num_domains)
    return {"D": num_domains, "training clients per cluster": clients.tolist(),
            "test images per domain": images.tolist(), "domains used at test": int((images > 0).sum())}


def writer_concentration(domains: Any, users: Any) -> Any:
    """The mean over clients (writers, celebrities) of the share of a client's images in its most frequent
    domain, next to the largest domain's overall share (what that share is when domains ignore clients);
    a clustering that follows writers concentrates them."""
    import pandas as pd
    import torch

    overall = torch.bincount(domains).max().item() / len(domains)
    shares = [torch.bincount(domains[users == u]).max().item() / int((users == u).sum())
              for u in users.unique().tolist()]
    return pd.Series({"clients": len(shares), "mean share in own top domain": sum(shares) / len(shares),
                      "largest domain's overall share": overall})


@dataclass(frozen=True)
class Measured:
    """What FedCG's claims are decided on: accuracies over the unseen test clients' images (the paper's metric,
    :func:`held_out_accuracy`) and the notebook's other measurements.

    ``table5``: held-out accuracy by ``(dataset, variant)``; ``table4``: by Table 4 setting, on
    ``table4_dataset``; ``table3``: by Table 3 row, on CelebA (empty where it did not run); ``test_images`` /
    ``majority``: per dataset, the unseen clients' images and their majority class (%); ``correlation``: the
    phi of each oracle attribute with smiling; ``domain_only``: smiling predicted by each oracle domain's
    majority label (%); ``final_lambda``: λ of the last domain layer per dataset.
    """

    table5: pd.Series
    table4: pd.Series
    table4_dataset: str | None
    table3: pd.Series
    test_images: Mapping[str, int]
    majority: Mapping[str, float]
    correlation: pd.Series
    domain_only: float
    final_lambda: pd.Series


def _held_out(accuracy: pd.Series, first: str, second: str, images: int) -> tuple[Difference, str]:
    """``first − second`` on the same unseen clients' ``images`` (the per-image model), and the two accuracies."""
    return (held_out_difference(accuracy[first], accuracy[second], images),
            f"{first} {accuracy[first]:.2f} vs {second} {accuracy[second]:.2f}")


def _best_row(accuracy: pd.Series, row: str, images: int) -> tuple[Difference, str]:
    """A ranking claim: ``row`` against every other row, corrected for picking the best of them."""
    _, difference = against_every_candidate(
        lambda other, level: held_out_difference(accuracy[row], accuracy[other], images, level=level),
        [other for other in accuracy.index if other != row])
    best = best_other(accuracy, row)
    return difference, f"{row} {standing(accuracy, row)}; best other: {side_label(best)} {accuracy[best[0]]:.2f}"


def claims(measured: Measured, profile: str) -> list[Claim]:
    """FedCG's claims (Tables 3–5, Sec. 4.2.1 and 4.3) on ``measured``. One seed's accuracies over the same unseen
    images are compared with the per-image standard error; a Table 5 claim is undecided ("not run") where
    FedAvg is within that noise of the majority class (nothing learned at this budget), and the λ claim while
    both λ are within 0.1 of their start."""
    m = measured
    ran5 = [f"{d}:{v}" for d, v in m.table5.index]

    def unseen(dataset: str, first: str, second: str,
               judge: Callable[[Difference], Difference] = lambda difference: difference) -> tuple[Any, str]:
        images, majority = m.test_images[dataset], m.majority[dataset]
        fedavg = m.table5[(dataset, "fedavg")]
        if fedavg <= majority + difference_noise(majority, images):
            return None, (f"undecided: FedAvg {fedavg:.2f} ≈ the majority class {majority:.2f}, nothing learned at "
                          "this budget")
        difference, evidence = _held_out(m.table5[dataset], first, second, images)
        return judge(difference), evidence

    def larger_lambda_on_femnist(initial: float = 1.0, moved: float = 0.1) -> tuple[Any, str]:
        final = m.final_lambda
        evidence = f"FEMNIST {final['femnist']:.2f}, CelebA {final['celeba']:.2f} (both start at {initial})"
        if max(abs(final - initial)) < moved:
            return None, f"undecided: {evidence}: λ barely moved at this budget"
        return final["femnist"] > final["celeba"], evidence

    def low_correlation() -> tuple[Any, str]:
        phi = m.correlation.abs()
        return bool(phi.max() < 0.3), (f"largest: {phi.idxmax()} phi = {phi.max():.2f}; the domain alone predicts "
                                       f"smiling on {m.domain_only:.1f} % of the faces")

    table4_images = m.test_images.get(m.table4_dataset, 0)
    return [
        check_claim("celeba_beats_fedavg",
                    "FedCG beats FedAvg on CelebA's unseen clients (Table 5: +2.30)", ["celeba:fedcg", "celeba:fedavg"],
                    ran5, lambda: unseen("celeba", "fedcg", "fedavg"), profile),
        check_claim("femnist_beats_fedavg",
                    "FedCG beats FedAvg on FEMNIST's unseen writers by a large margin (Table 5: +5.60; we ask for > 2)",
                    ["femnist:fedcg", "femnist:fedavg"], ran5,
                    lambda: unseen("femnist", "fedcg", "fedavg", lambda difference: difference.exceeding(2.0)),
                    profile),
        check_claim("femnist_beats_fedprox",
                    "FedCG beats FedProx on FEMNIST (Table 5)", ["femnist:fedcg", "femnist:fedprox"], ran5,
                    lambda: unseen("femnist", "fedcg", "fedprox"), profile),
        check_claim("femnist_close_to_scaffold",
                    "FedCG is close to SCAFFOLD on FEMNIST, within 1 point (Table 5: −0.79)",
                    ["femnist:fedcg", "femnist:scaffold"], ran5,
                    lambda: unseen("femnist", "fedcg", "scaffold", lambda difference: difference.within(1.0)), profile),
        check_claim("last_layer_d4_best",
                    "Domain residuals on the last layer with D = 4 are the best Table 4 setting (89.18)",
                    ["last-eye-clf-4-soft", "all-eye-clf-4-hard"], list(m.table4.index),
                    lambda: _best_row(m.table4, "last-eye-clf-4-soft", table4_images), profile),
        check_claim("domains_beat_kmeans",
                    "With D = 4, the classifier's domains beat K-means clusters of client models "
                    "(Table 4: 88.74 vs 87.21)",
                    ["all-eye-clf-4-hard", "all-eye-kmeans-4-hard"], list(m.table4.index),
                    lambda: _held_out(m.table4, "all-eye-clf-4-hard", "all-eye-kmeans-4-hard", table4_images), profile),
        check_claim("hamming_relu_best_table3",
                    "Given oracle domains, FedCG with Hamming-weighted A and ReLU is the best Table 3 row (89.57)",
                    ["fedcg_H_W_relu", "domain_models"], list(m.table3.index),
                    lambda: _best_row(m.table3, "fedcg_H_W_relu", m.test_images.get("celeba", 0)), profile),
        check_claim("hamming_beats_uniform",
                    "With residual layers, Hamming-weighted A beats uniform A (Table 3: 89.57 vs 87.97)",
                    ["fedcg_H_W_relu", "fedcg_U_W_relu"], list(m.table3.index),
                    lambda: _held_out(m.table3, "fedcg_H_W_relu", "fedcg_U_W_relu", m.test_images.get("celeba", 0)),
                    profile),
        check_claim("attributes_low_correlation",
                    "The five oracle attributes have a low correlation with smiling (Sec. 4.2.1; we ask |phi| < 0.3)",
                    list(DOMAIN_ATTRIBUTES[:5]), list(m.correlation.index), low_correlation, profile),
        check_claim("lambda_larger_on_femnist",
                    "The final λ is larger on FEMNIST than on CelebA (Sec. 4.3: 2.1 vs 0.3)", ["celeba", "femnist"],
                    list(m.final_lambda.index), larger_lambda_on_femnist, profile),
    ]


#: The CSVs of a results folder the claims are decided on (:func:`decide`), by logical name: Table 5's, Table 4's,
#: the clients' and λ's are required; Table 3's and the attributes' correlation are optional (written only where
#: Table 3 ran; its claims are then "not run").
CLAIM_FILES = {"table5": "table5_paper_vs_measured.csv", "table4": "table4_paper_vs_measured.csv",
               "table3": "table3_paper_vs_measured.csv", "clients": "clients.csv",
               "correlation": "table3_attribute_correlation.csv", "lambda": "lambda.csv"}
REQUIRED_CLAIM_FILES = ("table5", "table4", "clients", "lambda")


def _indexed(frame: pd.DataFrame | None, value: str) -> pd.Series:
    """``frame``'s ``value`` column indexed by its first column (empty where ``frame`` is None): a published table
    read back, whether its first column is named ("setting") or was an unnamed index ("" or "Unnamed: 0")."""
    if frame is None:
        return pd.Series(dtype=float)
    return frame.set_index(frame.columns[0])[value]


def decide(frames: Mapping[str, pd.DataFrame | None], profile: str, domain_only: float = float("nan"),
           table4_dataset: str | None = None) -> pd.DataFrame:
    """The claims table of :func:`claims` decided on the tables the notebook publishes, named as :data:`CLAIM_FILES`
    (None or absent for an optional one) — what :func:`derive` hands it and :func:`decide_from_clients` reads back.

    Table 5's methods may be its labels (:data:`LABELS`) or its variants. ``domain_only`` (smiling predicted by each
    oracle domain's majority label, %) is in no published table: only its evidence text shows it.
    ``table4_dataset``: where Table 4 ran; None for the profile's first dataset (where :func:`table4_config` runs it).
    """
    from gflkit.papers import claims_table

    variants = {label: variant for variant, label in LABELS.items()}
    table5 = frames["table5"].assign(variant=lambda f: f["method"].map(lambda method: variants.get(method, method)))
    clients = frames["clients"].set_index("dataset")
    if table4_dataset is None and profile in PROFILES:
        table4_dataset = PROFILES[profile].sweep["datasets"][0]
    correlation = frames.get("correlation")
    measured = Measured(
        table5=table5.set_index(["dataset", "variant"])["measured"], table4=_indexed(frames["table4"], "measured"),
        table4_dataset=table4_dataset, table3=_indexed(frames.get("table3"), "measured"),
        test_images=clients["test-client images"].astype(int).to_dict(),
        majority=clients["majority class (%)"].to_dict(),
        correlation=pd.Series(dtype=float) if correlation is None else _indexed(correlation, correlation.columns[1]),
        domain_only=domain_only, final_lambda=_indexed(frames["lambda"], "measured λ (last domain layer)"))
    return claims_table(claims(measured, profile))


def decide_from_clients(folder: str | Path, profile: str) -> pd.DataFrame:
    """:func:`decide` on a folder's committed CSVs (:data:`CLAIM_FILES`). The share of faces whose oracle domain
    predicts smiling is in none of them, so the attributes claim's evidence shows it as ``nan``."""
    from gflkit.papers import committed_csvs

    return decide(committed_csvs(folder, CLAIM_FILES, REQUIRED_CLAIM_FILES, "fedcg"), profile)


def _with_index(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its index as the first column, named as the index ("" when unnamed): written without an index
    (:func:`gflkit.outputs.write_outputs`), it is the file ``frame.to_csv(path)`` writes."""
    return frame.rename_axis(frame.index.name if frame.index.name is not None else "").reset_index()


def clients_table(configs: Iterable[Any], data_root: str | Path | None = None) -> pd.DataFrame:
    """Per dataset (one run configuration of each, under ``data_root``): its clients, training and unseen test
    clients, their images, and the majority class of the test clients' images (%), what a model that learned
    nothing scores; indexed by dataset."""
    import torch

    from gflkit.data import load_dataset
    from gflkit.experiment import client_split

    rows = []
    for config in configs:
        data = load_dataset(config.dataset, root=data_root, **config.data_options)
        split = client_split(data, config)
        held = split.held_out.nonzero().flatten().tolist()
        test_labels = data.y[torch.cat([split.test[k] for k in held])]
        rows.append({"dataset": config.dataset, "clients": split.num_clients,
                     "training clients": split.num_clients - len(held), "test clients": len(held),
                     "training images": sum(len(t) for t in split.train), "test-client images": len(test_labels),
                     "majority class (%)": 100.0 * float(torch.bincount(test_labels).max()) / len(test_labels),
                     "images": data.info.get("images", "")})
    return pd.DataFrame(rows).set_index("dataset")


def table5_tables(records: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Table 5's and Table 2's published tables from Table 5's ``records``: ``table5_records.csv`` (the records),
    ``table5_paper_vs_measured.csv`` (held-out accuracy per dataset and method, labelled as :data:`LABELS`, beside
    the paper's) and ``table2.csv`` (our FedAvg beside the paper's TensorFlow and PyTorch ones, per dataset)."""
    table5 = held_out_accuracy(records)
    measured = table5.rename(columns={"variant": "method", "accuracy": "value"}).assign(metric="accuracy")
    versus = paper_vs_measured(measured, reported("fedcg", "table5"), on=["dataset", "method", "metric"])
    versus["method"] = versus["method"].map(LABELS)
    fedavg = table5[table5["variant"] == "fedavg"].set_index("dataset")["accuracy"]
    paper2 = reported("fedcg", "table2").pivot(index="dataset", columns="setting", values="value")
    table2 = paper2.reindex(fedavg.index).assign(measured=fedavg)[["measured", "tensorflow", "pytorch"]]
    return {"table5_records.csv": records, "table5_paper_vs_measured.csv": versus, "table2.csv": _with_index(table2)}


def table4_tables(records: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Table 4's published tables from its ``records``: ``table4_records.csv`` (the records) and
    ``table4_paper_vs_measured.csv`` (held-out accuracy per setting beside the paper's)."""
    table4 = held_out_accuracy(records, by=("setting",))
    measured = table4.rename(columns={"accuracy": "value"}).assign(method="fedcg", metric="accuracy")
    versus = paper_vs_measured(measured, reported("fedcg", "table4"), on=["setting", "method", "metric"])
    return {"table4_records.csv": records, "table4_paper_vs_measured.csv": versus}


def kmeans_clusters(runs: Iterable[Run], runtime: Runtime) -> pd.DataFrame:
    """Per K-means row of ``runs`` (Table 4's, read from ``runtime``'s store): training clients per cluster and the
    unseen test clients' images per domain the student gives them (:func:`cluster_summary`), indexed by setting."""
    import torch

    from gflkit.experiment import client_split, stored_artifacts

    rows = {}
    for run in runs:
        config = run.config
        if config.method != "fedcg_kmeans":
            continue
        probabilities, data = domain_probabilities(config, runtime)
        split = client_split(data, config)
        test_images = torch.cat([split.test[k] for k in split.held_out.nonzero().flatten().tolist()])
        rows[run.labels["setting"]] = cluster_summary(stored_artifacts(config, runtime)["client_domains"],
                                                      probabilities[test_images].argmax(dim=1), probabilities.shape[1])
    return pd.DataFrame.from_dict(rows, orient="index")


def _table3_method(row: str) -> str:
    """The method a Table 3 row has in ``fedcg.csv``: ``domain_models``, ``gcn`` or ``fedcg``."""
    return "domain_models" if row == "domain_models" else row.split("_")[0]


def attribute_correlation(faces: Any) -> pd.DataFrame:
    """The phi of each of the five oracle attributes with smiling over the CelebA images ``faces``, one row each."""
    import torch

    names, attributes = faces.info["attribute_names"], faces.info["attributes"]
    return pd.DataFrame({"correlation with smiling (phi)": {
        name: float(torch.corrcoef(torch.stack([attributes[:, names.index(name)].float(), faces.y.float()]))[0, 1])
        for name in DOMAIN_ATTRIBUTES[:5]}})


def oracle_domain_only(faces: Any) -> float:
    """Smiling predicted by each oracle domain's majority label (%, :func:`label_given_domain`) over ``faces``, CelebA
    with the oracle domain code in its last channel (``domain_channel``)."""
    return label_given_domain(faces.x[:, -1, 0, 0].round().long(), faces.y)


def table3_tables(records: pd.DataFrame, faces: Any) -> dict[str, pd.DataFrame]:
    """Table 3's published tables from its ``records`` and the CelebA images ``faces`` it ran on:
    ``table3_records.csv`` (the records), ``table3_paper_vs_measured.csv`` (held-out accuracy per row beside the
    paper's) and ``table3_attribute_correlation.csv`` (:func:`attribute_correlation`)."""
    table3 = held_out_accuracy(records, by=("setting",))
    measured = table3.rename(columns={"accuracy": "value"}).assign(method=table3["setting"].map(_table3_method),
                                                                   metric="accuracy")
    versus = paper_vs_measured(measured, reported("fedcg", "table3"), on=["setting", "method", "metric"])
    return {"table3_records.csv": records, "table3_paper_vs_measured.csv": versus,
            "table3_attribute_correlation.csv": _with_index(attribute_correlation(faces))}


def lambda_table(lambdas: Mapping[str, float]) -> pd.DataFrame:
    """The final λ of the last domain layer per dataset (``lambdas``) beside the paper's (Sec. 4.3), indexed by
    dataset."""
    paper = reported("fedcg", "lambda").set_index("dataset")["value"]
    return pd.DataFrame([{"dataset": dataset, "measured λ (last domain layer)": value,
                          "paper": paper.get(dataset, float("nan"))} for dataset, value in lambdas.items()]
                        ).set_index("dataset")


def attribute_table(domains: Any, data: Any) -> pd.DataFrame:
    """:func:`domains_against_attributes` for the images' discovered ``domains`` over the :data:`DOMAIN_ATTRIBUTES`
    ``data`` has, with a last row ``all images``: every image's count and attribute fractions."""
    names = list(data.info["attribute_names"])
    columns = [names.index(a) for a in DOMAIN_ATTRIBUTES if a in names]
    table = domains_against_attributes(domains, data.info["attributes"][:, columns], [names[i] for i in columns])
    table.loc["all images"] = [len(domains), *data.info["attributes"][:, columns].float().mean(0).tolist()]
    return table


def derive(records: Mapping[str, pd.DataFrame | None], clients: pd.DataFrame, kmeans: pd.DataFrame,
           lambdas: Mapping[str, float], domains: Mapping[str, pd.DataFrame], profile: str, faces: Any = None,
           table4_dataset: str | None = None) -> dict[str, pd.DataFrame]:
    """Every table the FedCG notebook publishes, by file name, from what it measured: each section's ``records``
    (``table5``, ``table4``, and ``table3`` or None where it did not run), the ``clients`` (:func:`clients_table`),
    the K-means rows (``kmeans``, :func:`kmeans_clusters`), the final λ per dataset (``lambdas``), the discovered
    domains' tables (``domains``, by name) and the CelebA images Table 3 ran on (``faces``):

    * ``clients.csv``: per dataset, its clients, training and unseen test clients, images and majority class;
    * ``table5_records.csv``, ``table5_paper_vs_measured.csv``, ``table2.csv``: :func:`table5_tables`;
    * ``table4_records.csv``, ``table4_paper_vs_measured.csv``: :func:`table4_tables`;
    * ``table4_kmeans_clusters.csv``: the K-means rows' clusters and test-time domains;
    * ``table3_records.csv``, ``table3_paper_vs_measured.csv``, ``table3_attribute_correlation.csv``: where Table 3
      ran, :func:`table3_tables`;
    * ``lambda.csv``: the final λ beside the paper's (:func:`lambda_table`);
    * ``domains_<name>.csv``: each table of ``domains`` (a discovered domain's attributes, how writers spread);
    * ``claims.csv``: :func:`decide` on these tables (``table4_dataset``: where Table 4 ran).
    """
    tables = {"clients.csv": _with_index(clients), **table5_tables(records["table5"]),
              **table4_tables(records["table4"]), "table4_kmeans_clusters.csv": _with_index(kmeans)}
    if records.get("table3") is not None:
        tables |= table3_tables(records["table3"], faces)
    tables["lambda.csv"] = _with_index(lambda_table(lambdas))
    tables |= {f"domains_{name}.csv": _with_index(table) for name, table in domains.items()}
    domain_only = oracle_domain_only(faces) if faces is not None else float("nan")
    tables["claims.csv"] = decide({name: tables.get(file) for name, file in CLAIM_FILES.items()}, profile,
                                  domain_only=domain_only, table4_dataset=table4_dataset)
    return tables
