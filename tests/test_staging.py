import json
import os
import subprocess
import sys

from gflkit import staging


def test_a_staging_folder_stores_runs_in_the_results_folder(tmp_path):
    stage = staging.staging_folder(tmp_path, "demo")
    assert stage.parent == tmp_path and stage.name == f".demo.{os.getpid()}.running"
    (stage / "runs" / "key").mkdir()
    assert (tmp_path / "runs" / "key").is_dir()


def test_publish_replaces_the_previous_outputs_together_and_keeps_the_store(tmp_path):
    (tmp_path / "old.csv").write_text("old")
    (tmp_path / "notes.txt").write_text("the user's")  # never published by gflkit: not listed, never removed
    first = staging.staging_folder(tmp_path, "demo")
    for name in ("table.csv", "gone_next_time.csv"):
        (first / name).write_text("first")
    (first / "runs" / "run").mkdir()
    assert staging.publish(first, tmp_path) == ["gone_next_time.csv", "table.csv"]
    second = staging.staging_folder(tmp_path, "demo")
    (second / "table.csv").write_text("second")
    staging.publish(second, tmp_path)
    assert (tmp_path / "table.csv").read_text() == "second"
    assert not (tmp_path / "gone_next_time.csv").exists()
    assert (tmp_path / "old.csv").exists() and (tmp_path / "notes.txt").exists()
    assert (tmp_path / "runs" / "run").is_dir() and not second.exists()
    assert json.loads((tmp_path / staging.MANIFEST).read_text()) == ["table.csv"]


def test_a_damaged_manifest_names_nothing_outside_the_folder(tmp_path):
    outside = tmp_path / "outside.csv"
    outside.write_text("keep")
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / ".hidden").write_text("keep")
    (folder / staging.MANIFEST).write_text(json.dumps(["../outside.csv", str(outside), ".hidden", 3]))
    staging.publish(staging.staging_folder(folder, "demo"), folder)
    assert outside.exists() and (folder / ".hidden").exists()
    (folder / staging.MANIFEST).write_text("not json")
    staging.publish(staging.staging_folder(folder, "demo"), folder)
    assert json.loads((folder / staging.MANIFEST).read_text()) == []


def test_a_manifest_listing_a_folder_keeps_it_and_publishing_goes_on(tmp_path):
    """A planted ``.gflkit-outputs`` naming the store or another folder removes neither, and every later
    publication still succeeds and rewrites the list."""
    (tmp_path / "runs" / "run").mkdir(parents=True)
    (tmp_path / "figures").mkdir()
    (tmp_path / staging.MANIFEST).write_text(json.dumps(["runs", "figures", "old.csv"]))
    (tmp_path / "old.csv").write_text("old")
    for _ in range(2):
        stage = staging.staging_folder(tmp_path, "demo")
        (stage / "table.csv").write_text("new")
        assert staging.publish(stage, tmp_path) == ["table.csv"]
    assert (tmp_path / "runs" / "run").is_dir() and (tmp_path / "figures").is_dir()
    assert not (tmp_path / "old.csv").exists()
    assert json.loads((tmp_path / staging.MANIFEST).read_text()) == ["table.csv"]


def test_a_notebook_that_does_not_store_runs_leaves_no_empty_store(tmp_path):
    staging.publish(staging.staging_folder(tmp_path, "demo"), tmp_path)
    assert not (tmp_path / "runs").exists()


def test_retarget_names_the_results_folder_wherever_the_notebook_named_the_staging_one(tmp_path):
    stage = staging.staging_folder(tmp_path, "demo")
    notebook = stage / "demo.ipynb"
    notebook.write_text(json.dumps({"cells": [
        {"source": [f"results_dir = \"{stage}\"\n"], "outputs": [{"text": [f"wrote {stage}/table.csv\n"]}]}]}))
    staging.retarget(notebook, stage, tmp_path)
    cell = json.loads(notebook.read_text())["cells"][0]
    assert cell["source"] == [f"results_dir = \"{tmp_path}\"\n"]
    assert cell["outputs"][0]["text"] == [f"wrote {tmp_path}/table.csv\n"]


def test_remove_dead_discards_only_the_staging_of_executions_whose_process_is_gone(tmp_path):
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    stale, live, other = (tmp_path / f".demo.{dead}.running", tmp_path / f".demo.{os.getpid()}.running",
                          tmp_path / f".other.{dead}.running")
    for folder in (stale, live, other):
        folder.mkdir()
    (tmp_path / "runs").mkdir()
    (stale / "runs").symlink_to("../runs")
    (tmp_path / "runs" / "finished").write_text("kept")
    staging.remove_dead(tmp_path, "demo")
    assert not stale.exists() and live.exists() and other.exists()
    assert (tmp_path / "runs" / "finished").read_text() == "kept", "the store the staging linked to is not followed"
