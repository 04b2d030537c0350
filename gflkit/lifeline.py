"""A notebook kernel started by ``gflkit notebook`` exits when that command is gone (killed, even by SIGKILL).

The command exports its pid as ``GFLKIT_PARENT_PID`` to the kernel it starts; when the kernel imports gflkit
(its first code cell does), :func:`watch_parent` starts a daemon thread that ends the kernel's process within
about a second of the command's end, so no orphaned kernel keeps computing, or retrying a Ray address, after
the command that started it. A kernel started otherwise (JupyterLab) has no such variable and is unaffected.
"""
from __future__ import annotations

import os
import threading
import time

ENV_PARENT = "GFLKIT_PARENT_PID"
#: seconds between two looks at the parent
POLL_S = 0.5


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (one owned by another user counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch_parent(poll: float = POLL_S) -> threading.Thread | None:
    """Exit this process once the process named by ``$GFLKIT_PARENT_PID`` is gone (or this process was
    re-parented away from it); None, and nothing watched, without that variable or in that process itself."""
    value = os.environ.get(ENV_PARENT, "").strip()
    if not value.isdigit() or int(value) == os.getpid():
        return None
    parent = int(value)

    def watch() -> None:
        while process_alive(parent) and os.getppid() in (parent, started_under):
            time.sleep(poll)
        os._exit(143)  # as a SIGTERM would: the command that owned this kernel is gone

    started_under = os.getppid()
    thread = threading.Thread(target=watch, name="gflkit-lifeline", daemon=True)
    thread.start()
    return thread
