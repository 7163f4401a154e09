"""A real Jupyter server on 127.0.0.1 with a token, and a minimal websocket frontend for its kernels.

Shared by the restart tests and ``benchmarks/bench_restart.py``. The server gets its own HOME,
IPython, config, data and runtime directories, so the user's settings and profiles never take
part, and it is always killed. Kernels are started through the REST API and driven over
``/api/kernels/<id>/channels`` the way JupyterLab does (JSON messages, a ``cellId`` in the
metadata), so the kernel id, the connection file and the auto-restarter are the server's own.
"""

from __future__ import annotations

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
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import websocket

from helpers import ROOT, TESTS


def isolated_env(home: Path, **extra: str) -> dict[str, str]:
    """Our tests importable; every Jupyter and IPython directory under ``home``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST" and not k.startswith("JUPYTER_")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(
        HOME=str(home),
        IPYTHONDIR=str(home / "ipython"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str  # http://127.0.0.1:<port>/
    token: str
    home: Path
    proc: subprocess.Popen
    log: Path

    @property
    def runtime(self) -> Path:
        return self.home / "runtime"

    @property
    def startup_dir(self) -> Path:
        return self.home / "ipython" / "profile_default" / "startup"

    def rest(self, method: str, path: str, body: Any = None, token: str | None = None, timeout: float = 10) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path.lstrip("/"), data=data, method=method)
        request.add_header("Authorization", f"token {self.token if token is None else token}")
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
        return json.loads(text) if text else None

    def start_kernel(self) -> str:
        return str(self.rest("POST", "api/kernels", {"name": "python3"})["id"])

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextlib.contextmanager
def jupyter_server(
    home: Path, app: str = "jupyter_server", timeout: float = 60, args: tuple[str, ...] = (), **env: str
) -> Iterator[Server]:
    """``python -m jupyter_server`` (or ``jupyterlab``) on 127.0.0.1 with a token; killed in ``finally``."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "root").mkdir(exist_ok=True)
    port, token = free_port(), secrets.token_hex(16)
    log = home / "server.log"
    argv = [
        sys.executable,
        "-m",
        app,
        *args,
        "--no-browser",
        f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={home / 'root'}",
        "--ServerApp.open_browser=False",
    ] + (["--allow-root"] if os.geteuid() == 0 else [])
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            env=isolated_env(home, **env),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=home / "root",
            start_new_session=True,
        )
    server = Server(f"http://127.0.0.1:{port}/", token, home, proc, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{app} exited with {proc.returncode}:\n{server.log_text()[-3000:]}")
            try:
                server.rest("GET", "api/status", timeout=2)
                break
            except (OSError, urllib.error.HTTPError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{app} did not answer in {timeout}s:\n{server.log_text()[-3000:]}") from None
                time.sleep(0.2)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


class WsKernel:
    """One kernel's channels over the server's websocket: execute cells, click widgets, wait for restarts."""

    def __init__(self, server: Server, kernel_id: str) -> None:
        self.server, self.kernel_id = server, kernel_id
        self.session = uuid.uuid4().hex
        self.ws: Any = None
        self.restarts = 0  # "restarting" statuses seen: the server restarted the kernel after it exited
        self.connect()

    def connect(self, timeout: float = 10) -> None:
        """A fresh connection under a fresh session: jupyter_server 2.14 would otherwise "restore" the old one,
        whose channels still point at the dead kernel's ports after a restart with new ports."""
        self.close()
        self.session = uuid.uuid4().hex
        ws_url = self.server.url.replace("http://", "ws://")
        self.ws = websocket.create_connection(
            f"{ws_url}api/kernels/{self.kernel_id}/channels?session_id={self.session}",
            header=[f"Authorization: token {self.server.token}"],
            timeout=timeout,
        )

    def close(self) -> None:
        if self.ws is not None:
            with contextlib.suppress(Exception):
                self.ws.close()
            self.ws = None

    def send(self, channel: str, msg_type: str, content: dict, metadata: dict | None = None) -> str:
        msg_id = uuid.uuid4().hex
        self.ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "msg_type": msg_type,
                        "session": self.session,
                        "username": "test",
                        "version": "5.3",
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    },
                    "parent_header": {},
                    "metadata": metadata or {},
                    "content": content,
                    "channel": channel,
                    "buffers": [],
                }
            )
        )
        return msg_id

    def receive(self, timeout: float) -> dict | None:
        self.ws.settimeout(max(0.05, timeout))
        try:
            raw = self.ws.recv()
        except websocket.WebSocketTimeoutException:
            return None
        msg = json.loads(raw) if isinstance(raw, str) else None
        if msg is not None and msg["msg_type"] == "status" and msg["content"]["execution_state"] == "restarting":
            self.restarts += 1
        return msg

    def collect(self, msg_id: str, timeout: float, reply_expected: bool = True) -> tuple[dict | None, list[dict]]:
        """The reply and the iopub messages of one request, until its idle."""
        reply, messages, idle = None, [], False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (idle and (reply is not None or not reply_expected)):
            msg = self.receive(deadline - time.monotonic())
            if msg is None:
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "restarting":
                    messages.append({"type": "restarting", "content": msg["content"]})
                continue
            if msg["channel"] == "shell":
                reply = msg["content"]
            elif msg["msg_type"] == "status":
                idle = msg["content"]["execution_state"] == "idle"
            else:
                messages.append({"type": msg["msg_type"], "content": msg["content"]})
        if not (idle and (reply is not None or not reply_expected)):
            raise TimeoutError(f"no reply and idle for {msg_id} after {timeout}s")
        return reply, messages

    def execute(self, code: str, cell_id: str | None = None, timeout: float = 120) -> tuple[dict, list[dict]]:
        msg_id = self.send(
            "shell",
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": True,
                "stop_on_error": True,
            },  # as JupyterLab sends it
            {"cellId": cell_id} if cell_id else {},
        )
        return self.collect(msg_id, timeout)

    def click(self, comm_id: str) -> str:
        return self.send(
            "shell", "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": {"event": "click"}}}
        )

    def wait_for_restarting(self, seen: int, timeout: float = 30) -> None:
        """Keep the socket open, as JupyterLab does, until the server says it restarted the kernel.

        Connecting while the kernel is dead would make the server wait for it (up to its 60 s
        ``kernel_info_timeout`` when the restart picks new ports), so a frontend waits here.
        """
        deadline = time.monotonic() + timeout
        while self.restarts <= seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no 'restarting' status for kernel {self.kernel_id} in {timeout}s")
            self.receive(deadline - time.monotonic())

    def pid(self, timeout: float = 30) -> int:
        """The kernel's process id, from a *silent* request: it runs no cell, so it triggers no replay."""
        msg_id = self.send(
            "shell",
            "execute_request",
            {
                "code": "",
                "silent": True,
                "store_history": False,
                "allow_stdin": False,
                "user_expressions": {"pid": "__import__('os').getpid()"},
                "stop_on_error": False,
            },
        )
        reply, _ = self.collect(msg_id, timeout=timeout)
        assert reply is not None and reply["status"] == "ok", reply
        return int(reply["user_expressions"]["pid"]["data"]["text/plain"])

    def wait_for_new_process(self, old_pid: int, restarts_seen: int | None = None, timeout: float = 60) -> float:
        """Until a kernel process other than ``old_pid`` answers; returns the seconds it took.

        ``restarts_seen``: the ``restarts`` count before the kernel exited by itself (the server's
        auto-restart); None after a REST restart, which returns once the new process runs.
        """
        started = time.monotonic()
        if restarts_seen is not None:
            self.wait_for_restarting(restarts_seen)
        deadline = started + timeout
        while time.monotonic() < deadline:
            # the server says "restarting" before it launches the new process (and maybe moves its ports):
            # connect once that process runs, and retry quickly if the connection caught the old ports
            if not self._new_process_running(old_pid):
                time.sleep(0.1)
                continue
            with contextlib.suppress(OSError, websocket.WebSocketException, TimeoutError):
                self.connect(timeout=10)
                if self.pid(timeout=5) != old_pid:
                    return time.monotonic() - started
            time.sleep(0.2)
        raise TimeoutError(f"kernel {self.kernel_id} did not come back in {timeout}s")

    def _new_process_running(self, old_pid: int) -> bool:
        """A process other than ``old_pid`` runs with this kernel's connection file (Linux /proc)."""
        needle = f"kernel-{self.kernel_id}.json".encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != old_pid:
                with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as f:
                    if needle in f.read():
                        return True
        return False


def text_of(messages: list[dict]) -> str:
    out = []
    for m in messages:
        c = m["content"]
        if m["type"] == "stream":
            out.append(c["text"])
        elif m["type"] in ("display_data", "execute_result"):
            out.append(c["data"].get("text/plain", "") + "\n")
        elif m["type"] == "error":
            out.append(f"{c['ename']}: {c['evalue']}\n")
    return "".join(out)


def widget_id(messages: list[dict], model: str, description: str) -> str:
    """The comm id of a widget the cell opened, found by its model name and description."""
    for m in messages:
        if m["type"] == "comm_open":
            state = m["content"]["data"].get("state", {})
            if state.get("_model_name") == model and state.get("description") == description:
                return str(m["content"]["comm_id"])
    raise LookupError(f"no {model} {description!r} among {len(messages)} messages")
