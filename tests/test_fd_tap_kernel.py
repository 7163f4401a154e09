"""The fd tap inside a real IPython kernel, on top of ipykernel's own fd 2 capture."""

from __future__ import annotations

import ast
import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[1]
ASSERT_LINE = (
    "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: "
    "block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
)
EXPECTED = ASSERT_LINE + "".join(f"stress {i:05d}\n" for i in range(5000))


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    """A kernel that does its own fd capture: ipykernel turns it off when it sees PYTEST_CURRENT_TEST."""
    from jupyter_client.manager import start_new_kernel

    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60, env=env)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def execute(kc: Any, code: str, timeout: float = 15) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one cell; return its reply and every iopub message of that cell up to idle."""
    msg_id = kc.execute(code, user_expressions={"result": "RESULT"} if "RESULT" in code else None)
    deadline = time.monotonic() + timeout
    messages: list[dict[str, Any]] = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no idle within {timeout}s; got {[m['msg_type'] for m in messages]}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
    while reply["parent_header"].get("msg_id") != msg_id:  # e.g. start_new_kernel's kernel_info reply
        reply = kc.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
    return reply["content"], messages


def stream_text(messages: list[dict[str, Any]], name: str) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream" and m["content"]["name"] == name)


def test_the_kernel_under_test_is_this_venvs_ipykernel_and_captures_fds_itself(kernel: Any) -> None:
    import ipykernel

    code = "import os, ipykernel\nos.write(2, b'plain fd write\\n')\nRESULT = ipykernel.__version__\n"
    reply, messages = execute(kernel, code)
    assert reply["status"] == "ok"
    assert ast.literal_eval(reply["user_expressions"]["result"]["data"]["text/plain"]) == ipykernel.__version__
    assert stream_text(messages, "stderr") == "plain fd write\n"


def test_lines_written_to_fd_2_reach_the_cell_once_in_order_and_the_tap_keeps_them(kernel: Any) -> None:
    code = f"""
import os
from cudaassert_ipy.capture.fd_tap import FdTap
st = os.fstat(2)
before = (st.st_ino, st.st_dev)
tap = FdTap(2)
tap.start()
m = tap.mark()
os.write(2, {ASSERT_LINE.encode()!r})
for i in range(5000):
    os.write(2, b"stress %05d\\n" % i)
tap.drain()
text = tap.text_since(m)
tap.stop()
st = os.fstat(2)
RESULT = {{"tail": text, "restored": (st.st_ino, st.st_dev) == before, "error": repr(tap.error)}}
"""
    reply, messages = execute(kernel, code)
    assert reply["status"] == "ok", reply
    result = ast.literal_eval(reply["user_expressions"]["result"]["data"]["text/plain"])
    assert result["tail"] == EXPECTED
    assert result["restored"] is True and result["error"] == "None"
    assert stream_text(messages, "stderr") == EXPECTED


def test_a_200_kb_write_with_the_gil_held_completes_with_the_tap_installed(kernel: Any) -> None:
    code = """
import ctypes
from cudaassert_ipy.capture.fd_tap import FdTap
tap = FdTap(2)
tap.start()
ctypes.PyDLL(None).write(2, b"z" * 200000, 200000)
tap.drain()
tap.stop()
"""
    reply, messages = execute(kernel, code, timeout=15)
    assert reply["status"] == "ok", reply
    assert stream_text(messages, "stderr") == "z" * 200000


def test_with_the_extension_loaded_each_cells_fd_output_arrives_before_that_cell_goes_idle(kernel: Any) -> None:
    """ipykernel publishes fd output from a reader thread; bytes it reads after idle miss their cell in JupyterLab."""
    reply, _ = execute(kernel, "%load_ext cudaassert")
    assert reply["status"] == "ok", reply
    try:
        late = []
        for i in range(15):
            payload = f"cell {i} " + "x" * 200_000 + "\n"
            reply, messages = execute(kernel, f"import os\nos.write(2, {payload.encode()!r})\n")
            assert reply["status"] == "ok", reply
            text = stream_text(messages, "stderr")
            if text != payload:
                late.append((i, len(text)))
        assert late == [], f"cells whose fd output was still arriving after idle (cell, bytes by idle): {late}"
    finally:
        execute(kernel, "%unload_ext cudaassert")
