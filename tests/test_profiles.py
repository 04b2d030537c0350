import pytest

from gflkit.experiment import RunConfig
from gflkit.papers.quickstart import PROFILES
from gflkit.profiles import resolve_profile


def test_each_quickstart_profile_resolves_to_valid_configs():
    for name in ("smoke", "ci", "paper"):
        profile = resolve_profile(PROFILES, name)
        for method in profile.sweep["methods"]:
            assert isinstance(profile.config(method=method), RunConfig)
    assert resolve_profile(PROFILES, "smoke").base["dataset"] == "digits", "smoke must run on embedded data"


def test_seeds_and_overrides_apply():
    profile = resolve_profile(PROFILES, "smoke", seeds=[3, 4], overrides={"rounds": 2, "shards": [5]})
    assert profile.seeds == (3, 4)
    assert profile.config().rounds == 2
    assert profile.sweep["shards"] == (5,)


@pytest.mark.parametrize("name, seeds, overrides, message", [
    ("fast", None, None, "unknown profile 'fast'; choose one of"),
    ("smoke", None, {"dataset": "imagenet"}, "unknown dataset 'imagenet'"),
    ("smoke", None, {"method": "fedsgd"}, "unknown method 'fedsgd'"),
    ("smoke", None, {"rounds": 0}, "rounds must be a positive"),
    ("smoke", None, {"rounds": -3}, "rounds must be a positive"),
    ("smoke", None, {"learning_rate": 0.1}, r"unknown override\(s\) \['learning_rate'\]"),
    ("smoke", [], None, "seeds must be a non-empty"),
    ("smoke", [0.5], None, r"seeds must be a non-empty list of non-negative integers such as \[0, 1\]"),
    ("smoke", "0", None, "seeds must be a non-empty list"),
    ("smoke", None, "{rounds: 3}", "overrides must be a dict"),
    ("smoke", None, {"shards": 2}, r"override shards is a sweep entry and takes a list, e.g. \{'shards': \[2\]\}"),
    ("smoke", None, {"method_options": {"mu": 0.5}}, "override method_options must map a method to its options"),
    ("smoke", None, {"method_options": {"fedsgd": {}}}, r"names unknown method\(s\) \['fedsgd'\]"),
    ("smoke", None, {"method_options": {"fedprox": {"lam": 1}}}, r"unknown option\(s\) \['lam'\] for method 'fedprox'"),
])
def test_bad_parameters_fail_with_one_clear_message(name, seeds, overrides, message):
    with pytest.raises(ValueError, match=message):
        resolve_profile(PROFILES, name, seeds=seeds, overrides=overrides)


def test_one_integer_seed_and_per_method_option_overrides():
    profile = resolve_profile(PROFILES, "smoke", seeds=2, overrides={"method_options": {"fedprox": {"mu": 0.5}}})
    assert profile.seeds == (2,)
    assert profile.config(method="fedprox").method_options["mu"] == 0.5
    assert profile.config(method="fedavg").method_options == {"share": "all"}


def test_required_datasets_default_to_the_base_dataset():
    from gflkit.papers import fedvgae

    assert resolve_profile(PROFILES, "ci").required_datasets == ("mnist",)
    assert fedvgae.PROFILES["ci"].required_datasets == ("cora", "citeseer", "polblogs")


def test_unknown_method_in_the_sweep_is_rejected():
    with pytest.raises(ValueError, match="unknown method 'fedsgd'"):
        resolve_profile(PROFILES, "smoke", overrides={"methods": ["fedavg", "fedsgd"]})


def test_per_method_options_apply_only_to_their_method():
    from gflkit.profiles import Profile

    profile = Profile("p", base=dict(dataset="digits", num_clients=5), method_options={"fedprox": {"mu": 0.5}})
    assert profile.config(method="fedprox").method_options == {"share": "all", "mu": 0.5}
    assert profile.config(method="fedavg").method_options == {"share": "all"}
    assert profile.config(method="fedprox", method_options={"mu": 0.1}).method_options == {"share": "all", "mu": 0.1}


def test_a_sweep_entry_may_not_share_a_run_config_fields_name():
    from gflkit.profiles import Profile

    with pytest.raises(ValueError, match=r"profile 'p': sweep entr\(ies\) \['rounds'\] share a RunConfig field's name"):
        Profile("p", base=dict(dataset="digits"), sweep={"rounds": (1, 2)})


def test_sfl_local_epochs_override_sets_the_runs_and_its_ablation_is_a_separate_entry():
    from gflkit.papers import sfl

    profile = resolve_profile(sfl.PROFILES, "ci", overrides={"local_epochs": 3, "local_epoch_counts": []})
    assert profile.config().local_epochs == 3
    assert sfl.grids(profile, ["table3", "local_epochs"]) == {
        "table3": sfl.grids(profile, ["table3"])["table3"], "local_epochs": []}
    assert all(run.config.local_epochs == 3 for run in sfl.grids(profile, ["table3"])["table3"])


@pytest.mark.parametrize("name", ["smoke", "ci", "paper1", "paper"])
def test_jgesr_profiles_are_valid_and_follow_the_papers_setting(name):
    from gflkit.papers.jgesr import PAPER_METHODS, PROFILES as JGESR_PROFILES, grids

    profile = resolve_profile(JGESR_PROFILES, name)
    config = profile.config(method="pdca")
    assert config.num_clients == 20 and config.partition == "dirichlet" and config.partition_options["alpha"] == 0.05
    assert config.test_ratio == 0.25 and config.model == "simple_cnn"
    assert tuple(profile.sweep["noise"]) == (0.1, 0.2)
    assert set(profile.sweep["methods"]) == set(PAPER_METHODS) | {"pdca_e"}
    # CFL may split after two thirds of the rounds: 20 of the paper's 30, as its authors' min_rounds
    assert profile.config(method="cfl").method_options["min_rounds"] == min(20, 2 * config.rounds // 3)
    sections = grids(profile)
    assert len(sections["table1"]) == len(profile.sweep["methods"]) * 2 * len(profile.seeds)
    assert {run.config.channel["noise_scale"] for run in sections["figure4"]} == {0.1}
    assert {run.labels["s"] for run in sections["figure4"]} == {0.1}
    assert [run.labels["missing"] for run in sections["figure4"][::len(profile.seeds)]] == list(profile.sweep["missing"])
    if name.startswith("paper"):  # the paper partitions the official training split
        assert (config.rounds, config.local_epochs, config.pool, config.dataset) == (30, 5, "train", "mnist")
    if name == "paper":
        assert len(profile.seeds) == 10
        assert len(profile.sweep["missing"]) == 11 and max(profile.sweep["missing"]) == 0.1
    if name == "paper1":
        assert profile.seeds == (0,)


def test_jgesr_grids_refuse_an_unknown_section():
    from gflkit.papers.jgesr import PROFILES as JGESR_PROFILES, grids

    with pytest.raises(ValueError, match=r"unknown section\(s\) \['table9'\]; choose from \['table1', 'figure4'\]"):
        grids(resolve_profile(JGESR_PROFILES, "smoke"), ["table9"])


@pytest.mark.parametrize("name", ["smoke", "ci", "paper"])
def test_fedvgae_profiles_are_valid_and_follow_the_papers_setting(name):
    from gflkit.papers.fedvgae import METHODS, PROFILES as FEDVGAE_PROFILES

    profile = resolve_profile(FEDVGAE_PROFILES, name)
    config = profile.config(method="fedvgae")
    assert config.num_clients == 10 and config.model == "vgae" and config.is_graph
    assert config.method_options["lam"] == 0.8 and config.method_options["phi"] == 0.5
    assert len(METHODS) == 8 and set(profile.sweep["methods"]) == set(METHODS)
    if name == "paper":
        assert (config.rounds, config.local_epochs, len(profile.seeds)) == (100, 5, 5)
        assert set(profile.sweep["link_datasets"]) == {"cora_full", "cora", "pubmed", "citeseer", "polblogs"}
    # the tables' protocol (module docstring of gflkit.papers.fedvgae)
    for method in METHODS:
        run = profile.config(method=method)
        assert (run.evaluate, run.optimizer, run.optimizer_state, run.lr) == ("local", "adam", "persistent", 0.01)
    decays = {m: profile.config(method=m).weight_decay for m in METHODS}
    assert decays == {**dict.fromkeys(METHODS, 0.0), "fedpub": 1e-6, "gcfl": 5e-4, "fedsage": 1e-4}
    gcfl = profile.config(method="gcfl").method_options
    assert (gcfl["eps_1"], gcfl["eps_2"]) == (0.4, 0.8), "calibrated so that GCFL+ splits (module docstring)"


def test_fedvgae_inputs_are_raw_for_links_and_row_normalised_for_nodes():
    from gflkit.papers.fedvgae import PROFILES as FEDVGAE_PROFILES, runs

    def configs(profile, dataset, task):
        return [run.config for run in runs(profile, dataset, task)]

    profile = resolve_profile(FEDVGAE_PROFILES, "ci")
    links, nodes = (configs(profile, "cora", task) for task in ("link_prediction", "node_classification"))
    assert {c.data_options["normalize_features"] for c in links} == {False}
    assert {c.data_options["normalize_features"] for c in nodes} == {True}
    assert [c.method for c in links] == list(profile.sweep["methods"])
    raw = resolve_profile(FEDVGAE_PROFILES, "ci", overrides={"data_options": {"normalize_features": False}})
    assert not configs(raw, "cora", "node_classification")[0].data_options["normalize_features"], "an override wins"


def test_per_method_protocol_applies_unless_the_caller_names_one():
    from gflkit.profiles import Profile

    profile = Profile("p", base=dict(dataset="digits", num_clients=5), method_config={"ifca": {"evaluate": "local"}})
    assert profile.config(method="ifca").evaluate == "local"
    assert profile.config(method="fedavg").evaluate == "server", "unlisted methods keep the base's protocol"
    assert profile.config(method="ifca", evaluate="server").evaluate == "server"
    assert resolve_profile({"p": profile}, "p", overrides={"rounds": 2}).protocol("ifca") == "local"
    switched = resolve_profile({"p": profile}, "p", overrides={"evaluate": "server"})
    assert switched.protocol("ifca") == switched.protocol("fedavg") == "server", "one parameter switches all"
    with pytest.raises(ValueError, match="unknown evaluation protocol evaluate='final'"):
        Profile("q", base=dict(dataset="digits", num_clients=5), method_config={"ifca": {"evaluate": "final"}}).config(method="ifca")


@pytest.mark.parametrize("name", ["smoke", "ci", "paper1", "paper"])
def test_fedska_profiles_score_each_method_as_the_authors_code_does(name):
    from gflkit.papers.fedska import PROFILES as FEDSKA_PROFILES, VARIANTS, grids

    profile = resolve_profile(FEDSKA_PROFILES, name)
    protocols = {m: profile.protocol(m) for m in profile.sweep["methods"]}
    assert protocols == {"fedavg": "server", "fedprox": "server", "fedu": "server", "local": "local",
                         "ditto": "local", "ifca": "local", "sfl": "local", "fedska": "local"}
    sections = grids(profile)
    assert all(run.config.evaluate == protocols[run.config.method] for runs in sections.values() for run in runs)
    assert all(run.labels["q"] == run.config.partition_options["shards_per_client"]
               for runs in sections.values() for run in runs)
    assert [run.labels["setting"] for run in sections["table3"]][::len(profile.seeds)] == list(VARIANTS)
    if name in ("paper1", "paper"):
        assert profile.config().rounds == 200 and profile.config().model == "mclr"
    if name == "paper1":
        assert profile.seeds == (0,) and len(sections["table1"]) == 24 and len(sections["table3"]) == 4
    with pytest.raises(ValueError, match="unknown section"):
        grids(profile, ["table9"])


def test_quickstart_uses_fedskas_protocol_and_jgesr_scores_what_the_server_holds():
    from gflkit.papers.jgesr import PROFILES as JGESR_PROFILES

    quick = resolve_profile(PROFILES, "ci")
    assert (quick.protocol("fedavg"), quick.protocol("local")) == ("server", "local")
    jgesr = resolve_profile(JGESR_PROFILES, "ci")
    assert {jgesr.protocol(m) for m in jgesr.sweep["methods"]} == {"server"}
