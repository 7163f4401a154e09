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
from enum import Enum
from pathlib import Path
from typing import Any

from cudaassert_ipy.restart.plan import FrontendKind

__all__ = [
    "Frontend",
    "FrontendKind",
    "ServerRef",
    "Verdict",
    "check_server",
    "detect",
    "edits_cells",
    "kernel_id",
    "kernel_key",
    "terminal_key",
    "vscode_key",
]

_HEADLESS_PARENTS = ("papermill", "nbconvert", "nbclient", "testbook")


class ServerRef:
    """The Jupyter server that launched this kernel: its URL, and where its credentials are.

    Holds no token: :func:`check_server` reads it from the runtime file for the one request that
    needs it. Its repr and str are the URL, so a traceback with locals, a log line or a pasted bug
    report never carries the token or the runtime file's other fields.
    """

    __slots__ = ("_runtime_file", "_url")

    def __init__(self, url: str, runtime_file: str | Path) -> None:
        self._url = url
        self._runtime_file = Path(runtime_file)

    @property
    def url(self) -> str:
        return self._url

    @property
    def runtime_file(self) -> Path:
        return self._runtime_file

    def read_token(self) -> str:
        """The token, read now from the runtime file ('' when it has none or cannot be read)."""
        try:
            info = json.loads(self._runtime_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ""
        token = info.get("token") if isinstance(info, dict) else None
        return token if isinstance(token, str) else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServerRef) and (self._url, self._runtime_file) == (other._url, other._runtime_file)

    def __hash__(self) -> int:
        return hash((self._url, self._runtime_file))

    def __repr__(self) -> str:
        return f"ServerRef({self._url!r})"

    def __str__(self) -> str:
        return self._url


@dataclass(frozen=True)
class Frontend:
    kind: FrontendKind
    key: str  # the plan's file key
    kernel_id: str | None = None
    notebook: str | None = None
    server: ServerRef | None = None  # the server that launched this kernel (URL only; no token)
    detail: str = ""  # where we looked, or why headless

    @property
    def restarts_itself(self) -> bool:
        return self.kind is FrontendKind.SERVER


class Verdict(str, Enum):
    """What the server said about this kernel's id."""

    OK = "ok"
    UNKNOWN = "unknown"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"


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


def find_server() -> tuple[ServerRef | None, str]:
    """The server that launched this kernel: its runtime file names its pid, and ours names our parent.

    Only the URL and the file's path are kept; the token stays in the file.
    """
    runtime = _runtime_dir()
    pids = [p for p in (os.environ.get("JPY_PARENT_PID", ""), str(os.getppid())) if p.isdigit()]
    names = [f"{kind}-{pid}.json" for pid in dict.fromkeys(pids) for kind in ("jpserver", "nbserver")]
    if runtime is None:
        return None, "no jupyter_core, no runtime dir"
    looked = f"{', '.join(names[::2])} in {runtime}"
    for name in names:
        try:
            info = json.loads((runtime / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and str(info.get("pid")) == name.split("-")[1][:-5]:
            return ServerRef(str(info.get("url") or ""), runtime / name), looked
    return None, looked


def _parent_cmdline() -> str:
    pid = os.environ.get("JPY_PARENT_PID") or str(os.getppid())
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


_NO_STDIN = "its client refuses input() (nbclient: papermill, jupyter nbconvert --execute)"


def _stdin_refused(shell: Any) -> bool:
    """nbclient, and so papermill and ``nbconvert --execute``, send every cell with ``allow_stdin=False``;
    JupyterLab, Notebook, VS Code, Colab and jupyter console allow it. Nothing there can click a widget."""
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:  # an older or foreign kernel without get_parent
        return False
    content = parent.get("content") if isinstance(parent, dict) else None
    header = parent.get("header") if isinstance(parent, dict) else None
    if not isinstance(content, dict) or not isinstance(header, dict) or header.get("msg_type") != "execute_request":
        return False
    return content.get("allow_stdin") is False


def detect(shell: Any) -> Frontend:
    K = FrontendKind
    user_ns = getattr(shell, "user_ns", {})
    vsc_file = user_ns.get("__vsc_ipynb_file__")
    notebook = vsc_file or os.environ.get("JPY_SESSION_NAME") or None
    if getattr(shell, "kernel", None) is None:
        return Frontend(K.TERMINAL, terminal_key(), detail="plain IPython")
    conn = connection_file()
    kid, key = kernel_id(conn), kernel_key(conn)
    run_type = os.environ.get("KAGGLE_KERNEL_RUN_TYPE", "")
    if run_type == "Batch":
        return Frontend(K.HEADLESS, key, kid, notebook, detail="KAGGLE_KERNEL_RUN_TYPE=Batch")
    if _stdin_refused(shell):
        return Frontend(K.HEADLESS, key, kid, notebook, detail=_NO_STDIN)
    server, looked = find_server()
    if server is not None:
        return Frontend(K.SERVER, key, kid, notebook, server, detail=server.url)
    if "google.colab" in sys.modules or run_type == "Interactive":
        return Frontend(K.SERVER, key, kid, notebook, detail=_NOT_JUPYTER)
    base = os.path.basename(conn or "")
    if vsc_file or base.startswith(("kernel-v2", "kernel-v3")) or "VSCODE_PID" in os.environ:
        return Frontend(K.VSCODE, vscode_key(vsc_file) if vsc_file else key, kid, vsc_file, detail="VS Code")
    launcher = [os.path.basename(part) for part in _parent_cmdline().split()[:3]]  # python -m X / bin/X, not args
    for word in _HEADLESS_PARENTS:
        if any(word in part for part in launcher):
            return Frontend(K.HEADLESS, key, kid, notebook, detail=f"launched by {word}")
    return Frontend(K.KERNEL, key, kid, notebook, detail=looked)


_NOT_JUPYTER = "Colab / Kaggle session"


def edits_cells(frontend: Frontend) -> bool:
    """Whether a frontend extension can edit this notebook's cells (JupyterLab 4 / Notebook 7 under a Jupyter server);
    Colab, Kaggle, VS Code, terminals and batch runs cannot: the patched cell is given to copy there."""
    return frontend.kind is FrontendKind.SERVER and frontend.detail != _NOT_JUPYTER


def check_server(server: ServerRef, kid: str, timeout: float = 2.0) -> tuple[Verdict, str]:
    """Ask the server whether it manages this kernel id. The token is read here and dropped on return."""
    import urllib.error  # here, not at the top: the restarted kernel imports this module at startup
    import urllib.request

    url = server.url
    if not url.startswith(("http://", "https://")):
        return Verdict.UNREACHABLE, f"no http URL in the server's runtime file ({url or 'empty'})"
    request = urllib.request.Request(f"{url.rstrip('/')}/api/kernels/{kid}")
    token = server.read_token()
    if token:
        request.add_header("Authorization", f"token {token}")
    del token
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # our own server, from its runtime file
            body = json.loads(response.read().decode("utf-8") or "{}")
        return (Verdict.OK, "") if body.get("id") == kid else (Verdict.UNKNOWN, "the server answered for another id")
    except urllib.error.HTTPError as e:
        return (Verdict.UNKNOWN if e.code == 404 else Verdict.REFUSED), f"HTTP {e.code}"
    except (OSError, ValueError) as e:
        return Verdict.UNREACHABLE, str(getattr(e, "reason", e))
    finally:
        request.remove_header("Authorization")  # the request object may outlive this call in a traceback
