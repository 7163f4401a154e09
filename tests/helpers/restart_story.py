"""The restart story in one process, for the request and replay tests.

Terminal IPython is a real target (the plan is armed, and replayed after a manual restart). "The
restart" is simulated in-process: unload, forget the namespace, mark the writer gone, and run the
stub's file. The real restarts are in test_restart_server.py.
"""

from __future__ import annotations

from cudaassert_ipy.restart import startup_stub
from cudaassert_ipy.shell import extension
from helpers.plans import dead_pid, edit

SETUP = [
    "import os\nBLOCKING_AT_IMPORT = os.environ.get('CUDA_LAUNCH_BLOCKING')\nimport torch",
    "from fake_cuda_session import make_batch, cross_entropy\nlogits, labels = make_batch()",
    "runs = globals().get('runs', 0) + 1",
    "labels.shape",
]
FAILING = "loss = cross_entropy(logits, labels)"


def run_story(shell):
    """The setup cells, then the training cell that kills the (pretend) GPU context; returns the first cell's number."""
    first = shell.execution_count
    for cell in SETUP:
        assert shell.run_cell(cell, store_history=True).success
    assert not shell.run_cell(FAILING, store_history=True).success
    return first


def plan_file(tmp_path):
    """The one plan the test's restart wrote."""
    plans = sorted((tmp_path / "rt" / "cudaassert").glob("plan-*.json"))
    assert len(plans) == 1
    return plans[0]


def restart_in_process(shell, tmp_path):
    """What the restart does to this process: the old kernel is gone, the stub runs in the fresh namespace."""
    extension.unload(shell)
    shell.reset(new_session=False)
    shell.user_ns["__name__"] = "__main__"
    for path in (tmp_path / "rt" / "cudaassert").glob("plan-*.json"):
        if path.read_text().startswith("{\n"):  # (not the ones a test broke on purpose)
            edit(path, writer_pid=dead_pid())
    stub = tmp_path / "startup" / startup_stub.STUB_NAME
    exec(compile(stub.read_text(), str(stub), "exec"), shell.user_ns)


def session_history(shell):
    return extension.current(shell).history.records


class FakeKernel:
    """A stand-in for ipykernel's kernel object: records ``do_shutdown`` instead of exiting."""

    def __init__(self):
        self.calls = []
        self.io_loop = self

    def do_shutdown(self, restart):
        self.calls.append(("do_shutdown", restart))

    def add_callback(self, fn, *args):
        self.calls.append(("add_callback", fn.__name__, args))
