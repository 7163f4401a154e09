"""restart/frontend.py: who restarts this kernel (a Jupyter server, VS Code, a headless run, a terminal),
and the key its plan is filed under."""

from __future__ import annotations

import json
import sys

import pytest

from cudaassert_ipy.restart.frontend import Frontend, ServerRef
from cudaassert_ipy.restart.plan import FrontendKind


class Kernelish:
    """Enough of a kernel for detect(): it only asks whether there is one."""


@pytest.fixture
def in_kernel(shell, monkeypatch, tmp_path):
    from cudaassert_ipy.restart import frontend

    monkeypatch.setattr(shell, "kernel", Kernelish(), raising=False)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("JPY_PARENT_PID", "4242")
    for var in ("KAGGLE_KERNEL_RUN_TYPE", "VSCODE_PID", "JPY_SESSION_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(frontend, "connection_file", lambda: str(tmp_path / "kernel-1234-abcd.json"))
    monkeypatch.setattr(frontend, "_parent_cmdline", lambda: "python -m pytest")
    return frontend


def test_a_kernel_launched_by_a_jupyter_server_is_restarted_by_it(in_kernel, shell, tmp_path):
    (tmp_path / "jpserver-4242.json").write_text(json.dumps({"pid": 4242, "url": "http://127.0.0.1:1/"}))
    fe = in_kernel.detect(shell)
    assert (fe.kind, fe.key, fe.kernel_id, fe.restarts_itself) == ("server", "1234-abcd", "1234-abcd", True)
    assert fe.server.url == "http://127.0.0.1:1/"


def test_a_runtime_file_of_another_server_is_not_ours(in_kernel, shell, tmp_path):
    (tmp_path / "jpserver-4242.json").write_text(json.dumps({"pid": 999, "url": "http://127.0.0.1:1/"}))
    fe = in_kernel.detect(shell)
    assert fe.kind == "kernel" and fe.detail.startswith("jpserver-4242.json, ") and str(tmp_path) in fe.detail


@pytest.mark.parametrize(
    ("setup", "kind"),
    [
        (lambda m, ns: m.setenv("KAGGLE_KERNEL_RUN_TYPE", "Batch"), "headless"),
        (lambda m, ns: m.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive"), "server"),
        (lambda m, ns: m.setitem(sys.modules, "google.colab", object()), "server"),
        (lambda m, ns: m.setitem(ns, "__vsc_ipynb_file__", "/nb/a.ipynb"), "vscode"),
        (lambda m, ns: m.setenv("VSCODE_PID", "1"), "vscode"),
        (lambda m, ns: None, "kernel"),
    ],
)
def test_who_restarts_the_kernel_is_read_from_the_environment(in_kernel, shell, monkeypatch, setup, kind):
    setup(monkeypatch, shell.user_ns)
    assert in_kernel.detect(shell).kind == kind


def test_vscode_plans_are_keyed_by_the_notebook_because_its_connection_file_changes(in_kernel, shell, monkeypatch):
    monkeypatch.setitem(shell.user_ns, "__vsc_ipynb_file__", "/nb/a.ipynb")
    fe = in_kernel.detect(shell)
    assert fe.key == in_kernel.vscode_key("/nb/a.ipynb") and fe.key.startswith("vsc-") and fe.notebook == "/nb/a.ipynb"


def test_papermill_and_nbclient_runs_are_headless(in_kernel, shell, monkeypatch):
    monkeypatch.setattr(in_kernel, "_parent_cmdline", lambda: "python -m papermill in.ipynb out.ipynb")
    fe = in_kernel.detect(shell)
    assert (fe.kind, fe.detail) == ("headless", "launched by papermill")


def test_plain_ipython_is_a_terminal_keyed_by_directory_and_tty(shell):
    from cudaassert_ipy.restart import frontend

    fe = frontend.detect(shell)
    assert fe.kind == "terminal" and fe.key == frontend.terminal_key() and fe.key.startswith("term-")


def test_kernel_ids_come_from_the_connection_file_name():
    from cudaassert_ipy.restart.frontend import kernel_id

    assert kernel_id("/run/kernel-5f1c-9a.json") == "5f1c-9a"
    assert kernel_id("/run/kernel-v3abcdef.json") == "v3abcdef"
    assert kernel_id("/run/other.json") is None and kernel_id("/run/kernel-.json") is None


def test_kernels_without_an_id_in_their_connection_file_are_keyed_by_the_file_or_the_host(monkeypatch):
    from cudaassert_ipy.restart import frontend

    assert frontend.kernel_key("/run/kernel-5f1c.json") == "5f1c"
    key = frontend.kernel_key("/colab/kernel_conn.json")
    assert key.startswith("conn-") and key == frontend.kernel_key("/colab/kernel_conn.json")
    monkeypatch.setattr(frontend, "connection_file", lambda: None)
    assert frontend.kernel_key().startswith("host-")


def test_the_server_reference_shows_its_url_only_and_reads_the_token_just_for_the_request(tmp_path):
    runtime_file = tmp_path / "jpserver-1.json"
    runtime_file.write_text(json.dumps({"url": "http://127.0.0.1:8888/", "token": "s3cr3t-t0ken", "pid": 1}))
    ref = ServerRef("http://127.0.0.1:8888/", runtime_file)
    fe = Frontend(FrontendKind.SERVER, "k", "k", None, ref, ref.url)
    for text in (repr(ref), str(ref), repr(fe), str(fe), repr(vars(fe))):
        assert "s3cr3t" not in text and "127.0.0.1:8888" in text
    assert not hasattr(ref, "__dict__")  # nowhere to keep a token by accident
    assert ref.read_token() == "s3cr3t-t0ken"
    runtime_file.unlink()
    assert ref.read_token() == ""  # the server is gone: no token, and no error
