"""Issue #16 in real kernels: 10,000 assertion lines stay out of the notebook and all reach the kernel's log.

A failing kernel prints one line per failing thread. The notebook cell keeps the first three raw
lines of each assert site plus one line counting the rest; the kernel's log (the Jupyter server's
own output, where ipykernel echoes fd 1/2) still gets every byte, in order; the report counts all.
The GPU failure is the test double (gpu_double: the reference's exact lines and exception text).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from gpu_double import assertion_lines
from helpers import kernel_env
from helpers.kernels import execute, running_kernel
from helpers.kernels import text_of as kernel_text
from helpers.server_harness import WsKernel, jupyter_server
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.capture.line_filter import MORE_LINES

pytestmark = pytest.mark.kernel

BURST = """
loss = assertion_lines("nll_loss_target_out_of_range", threads=100, blocks=50).splitlines(keepends=True)
index = assertion_lines("advanced_indexing_out_of_range_v1", threads=100, blocks=50).splitlines(keepends=True)
ordinary = [f"epoch {i}: ordinary line\\n".encode() for i in range(0, 5000, 250)]
lines = []  # the two sites' lines alternating, an ordinary line every 500
for i, (a, b) in enumerate(zip(loss, index)):
    lines += [a, b]
    if i % 250 == 0:
        lines.append(ordinary[i // 250])
"""
FAILING_CELL = (
    """
import os
from gpu_double import DEVICE_ASSERT_WORDINGS, assertion_lines, make_exception
"""
    + BURST
    + """
os.write(1, b"stdout before\\n")
blob = b"".join(lines)
while blob:
    blob = blob[os.write(2, blob):]
os.write(1, b"stdout after\\n")
raise make_exception(*DEVICE_ASSERT_WORDINGS["1.9-1.13"])
"""
)


def burst() -> list[bytes]:
    """What the failing cell writes to fd 2, line by line."""
    space: dict = {"assertion_lines": assertion_lines}
    exec(BURST, space)
    return list(space["lines"])


def more(site: str) -> str:
    return MORE_LINES.format(prefix=PREFIX, count="4,997", lines="lines", site=site, were="were")


def expected_cell_stderr() -> str:
    """The first three lines of each site and every ordinary line, in the order written."""
    seen: dict = {}
    shown = []
    for line in burst():
        site = line.split(b": block")[0] if b"Assertion" in line else line
        seen[site] = seen.get(site, 0) + 1
        if seen[site] <= 3:
            shown.append(line)
    return b"".join(shown).decode()


def run_notebook(*cells: str) -> nbformat.NotebookNode:
    nb = new_notebook(
        cells=[new_code_cell(c, metadata={"tags": ["raises-exception"]}) for c in cells],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    NotebookClient(nb, timeout=180, kernel_name="python3").execute(env=kernel_env())
    return nb


def stream(cell: nbformat.NotebookNode, name: str) -> str:
    return "".join(o["text"] for o in cell.outputs if o["output_type"] == "stream" and o["name"] == name)


def report_text(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("data", {}).get("text/plain", "") for o in cell.outputs if o["output_type"] == "display_data")


def test_10000_lines_of_two_sites_store_under_20_kb_of_stderr_with_every_ordinary_line_and_a_full_count() -> None:
    nb = run_notebook("%load_ext cudaassert", FAILING_CELL)
    cell = nb.cells[1]
    stderr = stream(cell, "stderr")
    assert len(stderr.encode()) <= 20_000, len(stderr.encode())
    assert stderr == expected_cell_stderr() + more("Loss.cu:250") + more("IndexKernel.cu:92")
    assert stream(cell, "stdout") == "stdout before\nstdout after\n"
    report = report_text(cell)
    assert re.search(
        r"Loss\.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in "
        r"5,?000 threads",
        report,
    ), report
    assert re.search(r"IndexKernel\.cu:92 .*failed in 5,?000 threads", report), report
    stored = len(nbformat.writes(nb).encode())
    assert stored < 200_000, stored


def test_minus_one_shows_every_line_in_the_cell_which_is_what_the_issue_measured() -> None:
    nb = run_notebook(
        "%config CudaAssert.raw_lines_per_site = -1\n%load_ext cudaassert",
        FAILING_CELL,
        "%config CudaAssert.raw_lines_per_site = 3",
        FAILING_CELL,
    )
    assert stream(nb.cells[1], "stderr") == b"".join(burst()).decode()  # 1.6 MB: the notebook the issue measured
    assert stream(nb.cells[3], "stderr") == expected_cell_stderr() + more("Loss.cu:250") + more("IndexKernel.cu:92")


def test_the_jupyter_servers_log_receives_every_line_in_order_while_the_cell_gets_the_thinned_stream(
    tmp_path: Path,
) -> None:
    with jupyter_server(tmp_path / "jupyter") as server:
        kernel = WsKernel(server, server.start_kernel())
        try:
            reply, _ = kernel.execute("%load_ext cudaassert")
            assert reply is not None and reply["status"] == "ok", reply
            reply, messages = kernel.execute(FAILING_CELL)
            assert reply is not None and reply["status"] == "error"
            cell = "".join(
                m["content"]["text"] for m in messages if m["type"] == "stream" and m["content"]["name"] == "stderr"
            )
            assert cell == expected_cell_stderr() + more("Loss.cu:250") + more("IndexKernel.cu:92")
        finally:
            kernel.close()
            server.rest("DELETE", f"api/kernels/{kernel.kernel_id}")
        # fd 1 has its own pipe and reader: its lines may land anywhere in fd 2's stream, as without us
        log = server.log.read_bytes().replace(b"stdout before\n", b"").replace(b"stdout after\n", b"")
    written = burst()
    ours = [line for line in log.splitlines(keepends=True) if line in set(written)]
    assert len(ours) == len(written) == 10_020
    assert ours == written
    assert b"".join(written) in log  # whole and contiguous: not a byte of anything else in between
    assert b"more lines of this assertion" not in log  # the count is for the cell; the log has the lines


def test_after_unload_every_line_reaches_the_cell_again() -> None:
    loss = [line for line in burst() if b"Loss.cu" in line]
    lines = b"".join(loss[:10])  # ten lines of one site
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        reply, messages = execute(kc, f"import os\n_ = os.write(2, {lines!r})")
        assert kernel_text(messages) == b"".join(loss[:3]).decode() + MORE_LINES.format(
            prefix=PREFIX, count="7", lines="lines", site="Loss.cu:250", were="were"
        )
        execute(kc, "%unload_ext cudaassert")
        reply, messages = execute(kc, f"import os\n_ = os.write(2, {lines!r})")
        assert reply["status"] == "ok" and kernel_text(messages) == lines.decode()


def test_where_ipykernel_does_not_capture_fds_the_tap_keeps_plain_forwarding(tmp_path: Path) -> None:
    profile = tmp_path / "profile_default"
    profile.mkdir()
    (profile / "ipython_kernel_config.py").write_text("c.IPKernelApp.capture_fd_output = False\n")
    with running_kernel(IPYTHONDIR=str(tmp_path)) as kc:
        execute(kc, "%load_ext cudaassert")
        reply, messages = execute(
            kc, "from cudaassert_ipy.shell.extension import current\ncurrent().tap.routed_fds, current().tap.active"
        )
        assert reply["status"] == "ok"
        assert kernel_text(messages) == "((), True)"
