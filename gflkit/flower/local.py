"""Flower on this machine: a SuperLink and one SuperNode per client as real processes, or a SuperLink that
simulates the clients, each run isolated from every other.

What ``flower-superlink --insecure`` and ``flower-supernode --insecure --node-config "partition-id=k
num-partitions=K"`` do on separate machines, on 127.0.0.1 with free ports — for the tests, the cost
benchmark and trying the deployment path before taking it to real nodes; with ``simulation=True`` the
SuperLink runs Flower's simulation runtime instead of waiting for SuperNodes (what ``flwr run`` starts as its
managed local SuperLink, but on free ports and in a private ``FLWR_HOME``, so that two checkouts on one
machine never share a SuperLink, and stopped when the block ends; ``gflkit flower`` runs it)::

    with LocalDeployment(num_supernodes=6, env={"GFLKIT_FLOWER_RESULTS": "/tmp/flower"}) as deployment:
        deployment.run("flower_app", {"method": "sfl", "records": "sfl.csv"})  # → /tmp/flower/sfl.csv

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
import re
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
        simulation: simulate the ``num_supernodes`` nodes in the SuperLink (Flower's simulation runtime)
            instead of starting SuperNode processes.

    Attributes:
        home: the block's ``FLWR_HOME`` (logs, the SuperLink's state, the connection ``flwr run`` uses).
        nodes: the SuperNode processes, by partition id (:meth:`stop_node` ends one, as a crashed node).
    """

    def __init__(self, num_supernodes: int, node_config: Mapping[str, Any] | None = None,
                 env: Mapping[str, str] | None = None, simulation: bool = False):
        if isinstance(num_supernodes, bool) or not isinstance(num_supernodes, int) or num_supernodes < 1:
            raise ValueError(f"num_supernodes must be a positive int, got {num_supernodes!r}")
        self.num_supernodes = num_supernodes
        self.simulation = simulation
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
                    "--database", str(self.home / "state.db"), *(["--simulation"] if self.simulation else []))
        self.address = address
        _wait_for(address, self.home / "superlink.log")
        for k in range(0 if self.simulation else self.num_supernodes):
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
        """``flwr run <app> local-deployment --stream`` with ``run_config`` overrides, checked first
        (:func:`check_app_run`); returns the finished command (its output in ``stdout``). A failed run
        (``flwr run`` exits 0 after a ServerApp's error) raises :class:`FlowerRunError` naming the cause."""
        check_app_run(app, run_config or {})
        command = [_tool("flwr"), "run", str(app), "local-deployment", "--stream"]
        if self.simulation:
            command += ["--federation-config", f"num-supernodes={self.num_supernodes}"]
        if run_config:
            command += ["--run-config", run_config_argument(run_config)]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout)
        output = done.stdout + done.stderr
        if done.returncode != 0 or "Exit Code" in output:
            raise FlowerRunError(failure_cause(output), output)
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


class FlowerRunError(RuntimeError):
    """A ``flwr run`` that failed: the message is the cause in one line, :attr:`output` all it printed."""

    def __init__(self, cause: str, output: str):
        super().__init__(f"flwr run failed: {cause}")
        self.output = output


def failure_cause(output: str) -> str:
    """The line of ``flwr run``'s output that names why the run failed: the first exception raised (the
    root of a chain such as Ray's start-up timeout → "Simulation Runtime crashed"), else Flower's exit code
    line, else the last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for pattern in (r"\b\w*(?:Error|Exception): .+", r"Exit Code: .+"):
        found = [match.group(0) for line in lines for match in [re.search(pattern, line)] if match]
        if found:
            return found[0]
    return lines[-1] if lines else "no output"


def app_run_config(app: str | Path, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The run config the ServerApp of ``app`` will read: its ``[tool.flwr.app.config]`` (sub-tables
    flattened with dots, as Flower does) with ``overrides`` on top."""
    import tomllib

    try:
        project = tomllib.loads((Path(app) / "pyproject.toml").read_text())
        table = project["tool"]["flwr"]["app"].get("config", {})
    except (OSError, KeyError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{app} is not a Flower app project (its pyproject.toml has no [tool.flwr.app]: "
                         f"{type(error).__name__})") from None

    def flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in values.items():
            found.update(flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value})
        return found

    return {**flat(table), **overrides}


def check_app_run(app: str | Path, overrides: Mapping[str, Any]) -> None:
    """Refuse, in one line and before any process starts, a run of ``app`` with ``overrides`` that its
    ServerApp would refuse (:func:`~gflkit.flower.run_config.settings_from_run_config`): a mistyped key
    (named), a wrong value, a method the Flower adapter does not run."""
    from gflkit.flower.run_config import settings_from_run_config

    settings_from_run_config(app_run_config(app, overrides))


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


__all__ = ["FlowerRunError", "LocalDeployment", "app_run_config", "check_app_run", "failure_cause", "free_port",
           "run_config_argument"]
