"""Shared fixtures: an in-process IPython shell with the extension loaded, and clean teardown.

Helpers (paths, harnesses) are in ``helpers/``; this file holds only fixtures.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def ipython_dir(tmp_path_factory):
    """IPYTHONDIR for the whole run, a temporary directory: no test reads the user's profile (its config,
    startup files, extensions) or writes history into ~/.ipython, whether it runs an in-process shell or
    starts a kernel (kernels inherit it unless a test gives them their own)."""
    path = tmp_path_factory.mktemp("ipython")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IPYTHONDIR", str(path))
        yield path


@pytest.fixture
def shell(ipython_dir):
    """The in-process InteractiveShell, with fresh namespaces, and the extension not loaded."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    # the shell is a process-wide singleton: made before IPYTHONDIR was set, it would use the user's profile
    assert Path(ip.profile_dir.location).is_relative_to(ipython_dir), ip.profile_dir.location
    ip.reset(new_session=False)
    ip.user_ns["__name__"] = "__main__"
    yield ip
    from cudaassert_ipy.shell import extension

    extension.unload(ip)
    for name in ("cudaassert", "cudaassert_ipy"):  # IPython's own bookkeeping of %load_ext
        ip.extension_manager.loaded.discard(name)
    ip.config.pop("CudaAssert", None)


@pytest.fixture
def loaded(shell):
    """The shell with the extension loaded (fd tap off: in-process tests must not re-plumb pytest's fds)."""
    shell.config.CudaAssert.tap = False
    shell.run_line_magic("load_ext", "cudaassert")
    from cudaassert_ipy.shell import extension

    return extension.current(shell)


@pytest.fixture
def restart_ext(loaded, shell, tmp_path, monkeypatch):
    """The extension loaded in a shell whose runtime and profile directories are temporary, ready to restart
    (``helpers.restart_story`` simulates the restart in this process)."""
    saved_env = dict(os.environ)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("CUDAASSERT_TEST_PRETEND_GPU", "1")
    monkeypatch.setattr(shell.profile_dir, "startup_dir", str(tmp_path / "startup"))
    yield loaded
    for event in ("pre_run_cell", "post_run_cell"):  # a late claim a test left waiting for its first cell
        for cb in list(shell.events.callbacks[event]):
            if type(getattr(cb, "__self__", None)).__module__ == "cudaassert_ipy.shell.resume":
                shell.events.unregister(event, cb)
    os.environ.clear()
    os.environ.update(saved_env)


@pytest.fixture
def plan_dir(tmp_path):
    """Where the restart tests write resume plans (``$JUPYTER_RUNTIME_DIR/cudaassert`` under ``restart_ext``)."""
    return tmp_path / "rt" / "cudaassert"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real Jupyter server for one test module (own HOME, token; always killed), whose kernels fail the
    way a GPU does where the training cell asks for it (``CUDAASSERT_TEST_PRETEND_GPU=1``, see
    ``fake_cuda_session``)."""
    from helpers.server_harness import jupyter_server

    with jupyter_server(tmp_path_factory.mktemp("jupyter"), CUDAASSERT_TEST_PRETEND_GPU="1") as s:
        yield s


@pytest.fixture(params=["checks-first", "cpu-kernel-first"])
def validator_strategy(request, monkeypatch):
    """Run a validator test both ways: every call checked before it runs (the CUDA path, forced on
    CPU), and the CPU default, where an exact CPU kernel checks first and only its failures are
    explained. The property tests then prove both that a checker has no false positives and that
    the CPU kernel it trusts raises exactly when the checker would."""
    from cudaassert_ipy.checks.mode import ValidatorMode

    monkeypatch.setattr(ValidatorMode, "trust_cpu_kernels", request.param == "cpu-kernel-first")
    return request.param


# --- which tests the Colab/Kaggle stage runs ------------------------------------------------------------------------
# That stage pins IPython, ipykernel, jupyter_client and ipywidgets; torch is the same as the latest stage's. So it
# runs the tests whose outcome those pins can change, marked ``frontend`` here: the ones that start kernels or a
# server, use the in-process shell, or import a frontend package or the layers built on one (restart/, shell/, view/).
_FRONTEND_FIXTURES = frozenset({"shell", "loaded", "restart_ext", "server"})
_FRONTEND_IMPORT = re.compile(
    r"^\s*(?:from|import)\s+(?:IPython|ipykernel|ipywidgets|jupyter_client|jupyter_server|nbclient|nbformat"
    r"|cudaassert_ipy\.(?:restart|shell|view)|helpers\.(?:kernels|server_harness|browser_harness|restart_story))\b",
    re.MULTILINE,
)


@functools.cache
def _imports_a_frontend(path: Path) -> bool:
    return bool(_FRONTEND_IMPORT.search(path.read_text(encoding="utf-8")))


def _uses_a_frontend(item: pytest.Item) -> bool:
    if item.get_closest_marker("kernel") or item.get_closest_marker("browser"):
        return True
    if _FRONTEND_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    return _imports_a_frontend(Path(item.path))


def pytest_configure(config: pytest.Config) -> None:
    """Under the Colab/Kaggle pins (jupyter_client 7), ignore the event loops their sync wrappers leave behind.

    jupyter_client 7 runs each call on the thread's current event loop, made and set on first use and never closed;
    once another loop is set in its place (``asyncio.run`` does so), the garbage collector warns about it and its
    self-pipe (an AF_UNIX socket pair) in whatever test runs then: an error under filterwarnings=error, blamed on a
    test that made no loop (seen once in the Colab/Kaggle stage). Only these two messages, only with
    jupyter_client < 8: with the latest releases such a leak still fails.
    """
    try:
        from jupyter_client import version_info
    except ImportError:
        return
    if version_info[0] < 8:
        for message in (
            r"Exception ignored in. <function BaseEventLoop.__del__",
            r"Exception ignored in. <socket.socket fd=\d+, family=1, type=1,",
        ):
            config.addinivalue_line("filterwarnings", f"ignore:{message}:pytest.PytestUnraisableExceptionWarning")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _uses_a_frontend(item):
            item.add_marker(pytest.mark.frontend)
