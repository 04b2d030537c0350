"""`make lab` starts JupyterLab on notebooks/ with the project's kernel: headless, on a free loopback port."""
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def test_make_lab_serves_the_notebooks_and_the_project_kernel(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    venv = Path(sys.executable).parent.parent
    args = (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} --IdentityProvider.token={token} "
            f"--ServerApp.port_retries=0" + (" --allow-root" if os.geteuid() == 0 else ""))  # CI containers run as root
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    lab = subprocess.Popen(["make", "-s", "lab", f"VENV={venv}", f"LAB_ARGS={args}"], cwd=REPO, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/api"
    try:
        deadline, contents = time.monotonic() + 90, None
        while time.monotonic() < deadline and contents is None:
            if lab.poll() is not None:
                pytest.fail(f"make lab exited with {lab.returncode}: {lab.stdout.read().decode()[-2000:]}")
            try:
                contents = get_json(f"{base}/contents?token={token}")
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        assert contents is not None, "JupyterLab did not answer within 90 s"
        names = {item["name"] for item in contents["content"]}
        assert {"quickstart.ipynb", "fedska.ipynb", "sfl.ipynb"} <= names, "the server's root is notebooks/"
        kernels = get_json(f"{base}/kernelspecs?token={token}")
        assert "python3" in kernels["kernelspecs"]
        python = Path(kernels["kernelspecs"]["python3"]["spec"]["argv"][0])
        assert python.parent.parent.resolve() == venv.resolve(), "the kernel runs the project's environment"
        with pytest.raises(urllib.error.HTTPError):
            get_json(f"{base}/contents")  # without the token: refused
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(timeout=30)
