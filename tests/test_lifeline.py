"""A kernel that `gflkit notebook` started ends with the command, even when the command is SIGKILLed."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gflkit.lifeline import ENV_PARENT, process_alive, watch_parent


def processes_with_parent(parent: int) -> list[int]:
    """The pids whose environment names ``parent`` as their gflkit parent (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"{ENV_PARENT}={parent}".encode() in environ:
                found.append(int(entry.name))
    return found


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_nothing_is_watched_without_the_variable_or_in_the_parent_itself(monkeypatch):
    monkeypatch.delenv(ENV_PARENT, raising=False)
    assert watch_parent() is None
    monkeypatch.setenv(ENV_PARENT, str(os.getpid()))
    assert watch_parent() is None
    assert process_alive(os.getpid()) and not process_alive(2 ** 22 + 1)


def test_a_process_that_imports_gflkit_ends_when_its_parent_is_killed(tmp_path):
    """A parent starts a child with GFLKIT_PARENT_PID set; the child imports gflkit and sleeps. SIGKILL the
    parent: the child is gone within seconds."""
    child = "import time, gflkit; time.sleep(120)"
    parent = ("import os, subprocess, sys, time; "
              f"env = {{**os.environ, {ENV_PARENT!r}: str(os.getpid())}}; "
              f"subprocess.Popen([sys.executable, '-c', {child!r}], env=env); time.sleep(120)")
    started = subprocess.Popen([sys.executable, "-c", parent])
    try:
        assert wait_until(lambda: processes_with_parent(started.pid), 30), "the child never started"
        (orphan,) = processes_with_parent(started.pid)
        time.sleep(1.0)  # the child has imported gflkit by now (or will, and then see its parent gone)
        started.send_signal(signal.SIGKILL)
        started.wait()
        assert wait_until(lambda: not process_alive(orphan) or _zombie(orphan), 15), "the orphan kept running"
    finally:
        started.kill()
        for pid in processes_with_parent(started.pid):
            os.kill(pid, signal.SIGKILL)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.skipif(not Path("/proc").exists(), reason="finds the kernel through /proc")
def test_a_killed_gflkit_notebook_takes_its_kernel_with_it(tmp_path):
    pytest.importorskip("papermill")
    env = {**os.environ, "GFLKIT_PROGRESS": "off"}
    command = subprocess.Popen([sys.executable, "-m", "gflkit.cli", "--threads", "1", "notebook", "quickstart",
                                "--profile", "smoke", "-p", "overrides={'rounds': 300}", "--results", str(tmp_path)],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: processes_with_parent(command.pid), 90), "no kernel started"
        kernels = processes_with_parent(command.pid)
        assert wait_until(lambda: any((tmp_path / "runs").glob("*/lock")), 90), "the kernel never started a run"
        command.send_signal(signal.SIGKILL)
        command.wait()
        assert wait_until(lambda: all(not process_alive(k) or _zombie(k) for k in kernels), 15), \
            "the kernel outlived the command that started it"
    finally:
        command.kill()
        for pid in processes_with_parent(command.pid):
            os.kill(pid, signal.SIGKILL)
