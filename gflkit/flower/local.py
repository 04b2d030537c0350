"""A Flower deployment on this machine: a SuperLink and one SuperNode per client as real processes.

What ``flower-superlink --insecure`` and ``flower-supernode --insecure --node-config "partition-id=k
num-partitions=K"`` do on separate machines, on 127.0.0.1 with free ports — for the tests, the cost
benchmark and trying the deployment path before taking it to real nodes::

    with LocalDeployment(num_supernodes=6) as deployment:
        deployment.run("flower_app", {"method": "sfl", "records": "/tmp/sfl.csv"})

Every process started is stopped when the block ends (also on an error or a KeyboardInterrupt) and the
block's folder :attr:`LocalDeployment.home` removed: Flower's ``FLWR_HOME`` for the block, with the
SuperLink connection ``flwr run`` reads and each process's log (a failed :meth:`LocalDeployment.run`
quotes the end of its output).

Each SuperNode runs with Flower's default ``--isolation subprocess``: it starts a fresh
``flwr-clientapp`` process for every message, which imports torch and gflkit and rebuilds the node's copy
of the run each time (``benchmarks/flower_round.py`` measures that start-up). flwr 1.42 has no
long-lived ClientApp process: ``--isolation process`` hands the spawning to a separate
``flower-superexec``, which again starts one process per message.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tool(name: str) -> str:
    """The path of a Flower command installed beside this Python (the virtual environment's ``bin``)."""
    path = Path(sys.executable).parent / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found beside {sys.executable} or on PATH; install Flower "
                                "(make setup installs it)")
    return found


def run_config_argument(values: Mapping[str, Any]) -> str:
    """``{"method": "sfl", "rounds": 5}`` → ``method='sfl' rounds=5`` (TOML values, for ``--run-config``)."""
    def toml(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return repr(value)
        text = str(value)
        if "'" not in text:  # a TOML literal string: Flower's parser takes no escapes, JSON's quotes stay as they are
            return f"'{text}'"
        if '"' not in text and "\\" not in text:
            return f'"{text}"'
        raise ValueError(f"run config value {text!r} holds both quote kinds, which Flower's --run-config cannot take")
    return " ".join(f"{key}={toml(value)}" for key, value in values.items())


class LocalDeployment:
    """A SuperLink and ``num_supernodes`` SuperNodes on 127.0.0.1, as a context manager (module docstring).

    Args:
        num_supernodes: SuperNodes to start; node ``k`` gets ``partition-id=k num-partitions=num_supernodes``.
        node_config: extra ``node_config`` entries for every node (e.g. ``{"data-root": "/data"}``).
        env: environment variables added for every process (e.g. ``GFLKIT_THREADS``).

    Attributes:
        home: the block's ``FLWR_HOME`` (logs, the SuperLink's state, the connection ``flwr run`` uses).
        nodes: the SuperNode processes, by partition id (:meth:`stop_node` ends one, as a crashed node).
    """

    def __init__(self, num_supernodes: int, node_config: Mapping[str, Any] | None = None,
                 env: Mapping[str, str] | None = None):
        if isinstance(num_supernodes, bool) or not isinstance(num_supernodes, int) or num_supernodes < 1:
            raise ValueError(f"num_supernodes must be a positive int, got {num_supernodes!r}")
        self.num_supernodes = num_supernodes
        self.node_config = dict(node_config or {})
        self.env = {**os.environ, **(env or {})}
        # Flower's processes start further Flower commands by name (flower-superexec, flwr-serverapp)
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])
        self.home = Path(tempfile.mkdtemp(prefix="gflkit-flower-"))
        self.env["FLWR_HOME"] = str(self.home)
        self.processes: list[subprocess.Popen] = []
        self.nodes: dict[int, subprocess.Popen] = {}
        self.address = ""

    def __enter__(self) -> "LocalDeployment":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _spawn(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.home / f"{name}.log", "wb")
        process = subprocess.Popen([*args], stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                   start_new_session=True)  # its own group: stopping it stops its children
        log.close()
        self.processes.append(process)
        return process

    def _start(self) -> None:
        # flwr 1.42 serves the SuperLink's Runtime, Control and Fleet APIs on one HTTP address
        port = free_port()
        address = f"127.0.0.1:{port}"
        self._spawn("superlink", _tool("flower-superlink"), "--insecure", "--host", "127.0.0.1", "--port", str(port),
                    "--database", str(self.home / "state.db"))
        self.address = address
        _wait_for(address, self.home / "superlink.log")
        for k in range(self.num_supernodes):
            config = {"partition-id": k, "num-partitions": self.num_supernodes, **self.node_config}
            node_port = free_port()
            node = self._spawn(f"supernode-{k}", _tool("flower-supernode"), "--insecure", "--superlink", address,
                               "--port", str(node_port),
                               "--node-config", run_config_argument(config))
            self.nodes[k] = node
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "local-deployment"\n\n[superlink.local-deployment]\n'
            f'address = "{address}"\ninsecure = true\n')

    def run(self, app: str | Path, run_config: Mapping[str, Any] | None = None, timeout: float = 600.0
            ) -> subprocess.CompletedProcess:
        """``flwr run <app> local-deployment --stream`` with ``run_config`` overrides; returns the finished
        command (its output in ``stdout``). Raises ``RuntimeError`` with the output's tail if it fails."""
        command = [_tool("flwr"), "run", str(app), "local-deployment", "--stream"]
        if run_config:
            command += ["--run-config", run_config_argument(run_config)]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0 or "Exit Code" in done.stdout + done.stderr:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
            raise RuntimeError(f"flwr run failed (exit {done.returncode}):\n{tail}")
        return done

    def stop_node(self, partition: int) -> None:
        """Kill the SuperNode of ``partition`` (and its ClientApp processes) at once, as a crashed machine."""
        _stop(self.nodes[partition], signal.SIGKILL)

    def close(self) -> None:
        """Stop every process started here (SIGTERM, then SIGKILL after 5 s) and remove :attr:`home`."""
        for process in reversed(self.processes):
            _stop(process, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _stop(process, signal.SIGKILL)
                process.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def _wait_for(address: str, log: Path, timeout: float = 60.0) -> None:
    """Wait until ``address`` accepts TCP connections (a server started); ``TimeoutError`` names its log."""
    host, port = address.split(":")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex((host, int(port))) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on {address} after {timeout:g} s; see {log}")


def _stop(process: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the process group of ``process`` (it and what it started), if it still runs."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


__all__ = ["LocalDeployment", "free_port", "run_config_argument"]
