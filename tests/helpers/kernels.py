"""Drive real IPython kernels through jupyter_client, collecting each cell's iopub messages."""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Iterator
from typing import Any

from jupyter_client.manager import start_new_kernel

from helpers import kernel_env


@contextlib.contextmanager
def running_kernel(**env: str) -> Iterator[Any]:
    """A fresh kernel (ipykernel's fd capture on, tests importable); always shut down."""
    km, kc = start_new_kernel(kernel_name="python3", env=kernel_env(**env), startup_timeout=60)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        # jupyter_client 7 (the Colab/Kaggle pins) leaves its zmq contexts open: one collected later, in another
        # test, warns there (an error under filterwarnings=error); close them here, where they were made
        for context in {id(c): c for c in (getattr(kc, "context", None), getattr(km, "context", None)) if c}.values():
            if not context.closed:
                context.destroy(linger=0)


def execute(kc: Any, code: str, timeout: float = 60, silent: bool = False) -> tuple[dict, list[dict]]:
    """Run one cell; return its execute_reply content and its iopub messages (type, content), in order."""
    msg_id = kc.execute(code, silent=silent, store_history=not silent)
    messages: list[dict] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(f"no idle after {timeout}s for {code[:60]!r}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            _late(kc, msg_id, messages)
            break
        if msg["msg_type"] != "status":
            messages.append({"type": msg["msg_type"], "content": msg["content"]})
    reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
    return reply["content"], messages


def text_of(messages: list[dict], mime: str = "text/plain") -> str:
    """All stream text and display/execute_result data of one mimetype, joined."""
    out = []
    for m in messages:
        c = m["content"]
        if m["type"] == "stream":
            out.append(c["text"])
        elif m["type"] in ("display_data", "execute_result", "update_display_data"):
            out.append(c["data"].get(mime, ""))
    return "".join(out)


def _late(kc: Any, msg_id: str, messages: list[dict], grace: float = 0.05) -> None:
    """Collect messages of this cell that arrive just after its idle (seen once with jupyter_client 7.4)."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            return
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] != "status":
            messages.append({"type": msg["msg_type"], "content": msg["content"]})
