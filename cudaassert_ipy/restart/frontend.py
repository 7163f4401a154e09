"""Who will restart this kernel, and under which key the restarted kernel will look for its plan.

- ``server``: a Jupyter server launched this kernel (``jpserver-<JPY_PARENT_PID>.json`` in the runtime
  dir; also Colab and Kaggle's interactive sessions). It restarts a kernel that exits, with the same
  kernel id, so ``do_shutdown(True)`` is the restart.
- ``vscode``: VS Code's local kernels are not restarted for you and get a new connection file on
  every restart, so the plan is keyed by the notebook path (``__vsc_ipynb_file__``) and armed.
- ``kernel``: a kernel whose launcher we cannot identify (``jupyter console``, a custom launcher):
  armed, keyed by kernel id, for a restart from the frontend (jupyter_client keeps the connection file).
- ``headless``: nbclient / papermill / nbconvert, Kaggle's ``KAGGLE_KERNEL_RUN_TYPE=Batch``: no button.
- ``terminal``: plain IPython, keyed by working directory and terminal.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Frontend", "check_server", "detect", "kernel_id", "kernel_key", "terminal_key", "vscode_key"]

_HEADLESS_PARENTS = ("papermill", "nbconvert", "nbclient", "testbook")


@dataclass(frozen=True)
class Frontend:
    kind: str  # server | vscode | kernel | headless | terminal
    key: str  # the plan's file key
    kernel_id: str | None = None
    notebook: str | None = None
    server: dict[str, Any] | None = None  # the server's runtime file (url, token, pid)
    detail: str = ""  # where we looked, or why headless

    @property
    def restarts_itself(self) -> bool:
        return self.kind == "server"


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def terminal_key() -> str:
    """Same directory, same terminal, same user: the IPython you start again after exiting this one."""
    try:
        tty = os.ttyname(0)
    except OSError:
        tty = ""
    return "term-" + _hash(f"{os.getcwd()}|{tty}|{os.getuid()}")


def vscode_key(notebook: str) -> str:
    return "vsc-" + _hash(os.path.normcase(os.path.abspath(notebook)))


def connection_file() -> str | None:
    try:
        from ipykernel.connect import get_connection_file

        return get_connection_file()
    except Exception:  # not in an ipykernel, or an app without a connection file
        return None


def kernel_id(path: str | None = None) -> str | None:
    """``kernel-<id>.json`` → ``<id>``: the id Jupyter's REST API and the restarted kernel share."""
    name = os.path.basename(path or connection_file() or "")
    if name.startswith("kernel-") and name.endswith(".json") and len(name) > 12:
        return name[7:-5]
    return None


def kernel_key(conn: str | None = None) -> str:
    """The plan key the restarted kernel will compute too: its id; else its connection file; else this host.

    The fallbacks are for launchers that name connection files otherwise (Colab's, perhaps): one
    notebook per machine there, and the plan still needs a dead writer and an unexpired plan.
    """
    conn = conn or connection_file()
    kid = kernel_id(conn)
    if kid:
        return kid
    if conn:
        return "conn-" + _hash(os.path.abspath(conn))
    return "host-" + _hash(str(os.getuid()))


def _runtime_dir() -> Path | None:
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        return Path(jupyter_runtime_dir())
    except ImportError:
        return None


def find_server() -> tuple[dict[str, Any] | None, str]:
    """The server that launched this kernel: its runtime file names its pid, and ours names our parent."""
    runtime = _runtime_dir()
    pids = [p for p in (os.environ.get("JPY_PARENT_PID", ""), str(os.getppid())) if p.isdigit()]
    names = [f"{kind}-{pid}.json" for pid in dict.fromkeys(pids) for kind in ("jpserver", "nbserver")]
    looked = f"{', '.join(names[::2])} in {runtime}" if runtime else "no jupyter_core, no runtime dir"
    for name in names if runtime else []:
        try:
            info = json.loads((runtime / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and str(info.get("pid")) == name.split("-")[1][:-5]:
            return info, looked
    return None, looked


def _parent_cmdline() -> str:
    pid = os.environ.get("JPY_PARENT_PID") or str(os.getppid())
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def detect(shell: Any) -> Frontend:
    user_ns = getattr(shell, "user_ns", {})
    vsc_file = user_ns.get("__vsc_ipynb_file__")
    notebook = vsc_file or os.environ.get("JPY_SESSION_NAME") or None
    if getattr(shell, "kernel", None) is None:
        return Frontend("terminal", terminal_key(), detail="plain IPython")
    conn = connection_file()
    kid, key = kernel_id(conn), kernel_key(conn)
    run_type = os.environ.get("KAGGLE_KERNEL_RUN_TYPE", "")
    if run_type == "Batch":
        return Frontend("headless", key, kid, notebook, detail="KAGGLE_KERNEL_RUN_TYPE=Batch")
    server, looked = find_server()
    if server is not None:
        return Frontend("server", key, kid, notebook, server, detail=str(server.get("url", "")))
    if "google.colab" in sys.modules or run_type == "Interactive":
        return Frontend("server", key, kid, notebook, detail="Colab / Kaggle session")
    base = os.path.basename(conn or "")
    if vsc_file or base.startswith(("kernel-v2", "kernel-v3")) or "VSCODE_PID" in os.environ:
        return Frontend("vscode", vscode_key(vsc_file) if vsc_file else key, kid, vsc_file, detail="VS Code")
    parent = _parent_cmdline()
    for word in _HEADLESS_PARENTS:
        if word in parent:
            return Frontend("headless", key, kid, notebook, detail=f"launched by {word}")
    return Frontend("kernel", key, kid, notebook, detail=looked)


def check_server(server: dict[str, Any], kid: str, timeout: float = 2.0) -> tuple[str, str]:
    """Ask the server whether it manages this kernel id: ``ok``, ``unknown``, ``refused`` or ``unreachable``."""
    import urllib.error  # here, not at the top: the restarted kernel imports this module at startup
    import urllib.request

    url = str(server.get("url") or "")
    if not url.startswith(("http://", "https://")):
        return "unreachable", f"no http URL in the server's runtime file ({url or 'empty'})"
    request = urllib.request.Request(f"{url.rstrip('/')}/api/kernels/{kid}")
    if server.get("token"):
        request.add_header("Authorization", f"token {server['token']}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # our own server, from its runtime file
            body = json.loads(response.read().decode("utf-8") or "{}")
        return ("ok", "") if body.get("id") == kid else ("unknown", "the server answered for another id")
    except urllib.error.HTTPError as e:
        return ("unknown" if e.code == 404 else "refused"), f"HTTP {e.code}"
    except (OSError, ValueError) as e:
        return "unreachable", str(getattr(e, "reason", e))
