"""Shared fixtures: an in-process IPython shell with the extension loaded, and clean teardown."""

from __future__ import annotations

import pytest


@pytest.fixture
def shell():
    """The in-process InteractiveShell, with fresh namespaces, and the extension not loaded."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
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
