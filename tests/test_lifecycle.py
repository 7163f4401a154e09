"""Load and unload are symmetric and idempotent, light, and configurable with %config."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from cudaassert_ipy.shell import extension, registry


def _snapshot(ip):
    """Everything the extension may touch, as comparable values."""
    for name in ("load_ext", "unload_ext", "reload_ext", "config"):  # IPython registers these lazily
        ip.find_line_magic(name)
    return {
        "events": {e: [repr(c) for c in cbs] for e, cbs in ip.events.callbacks.items()},
        "line": sorted(ip.magics_manager.magics["line"]),
        "cell": sorted(ip.magics_manager.magics["cell"]),
        "registry": sorted(ip.magics_manager.registry),
        "configurables": [id(c) for c in ip.configurables],
        "plain_printers": dict(ip.display_formatter.formatters["text/plain"].deferred_printers),
        "active": registry.active(ip),
    }


def _count_hooks(ip):
    return sum(
        1
        for cbs in ip.events.callbacks.values()
        for c in cbs
        if getattr(getattr(c, "__self__", None), "__module__", "").startswith("cudaassert_ipy")
    )


def test_load_then_unload_leaves_ipython_exactly_as_found(shell):
    shell.config.CudaAssert.tap = False
    before = _snapshot(shell)
    shell.run_line_magic("load_ext", "cudaassert")
    assert _snapshot(shell) != before
    assert "cudaassert" in shell.magics_manager.magics["line"]
    assert "cuda_debug" in shell.magics_manager.magics["cell"]
    shell.run_line_magic("unload_ext", "cudaassert")
    assert _snapshot(shell) == before


def test_loading_twice_under_both_names_installs_one_set_of_hooks(shell):
    shell.config.CudaAssert.tap = False
    shell.run_line_magic("load_ext", "cudaassert")
    shell.run_line_magic("load_ext", "cudaassert_ipy")
    extension.load(shell)
    assert _count_hooks(shell) == 2  # one pre_run_cell, one post_run_cell


BAD_LABEL = "import torch, torch.nn.functional as F\nF.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 3]))"
REPORTED = "[cudaassert] CPU error · class label out of range in cross_entropy"


def test_reload_ext_leaves_one_set_of_hooks_that_reports_once(shell, capsys):
    shell.config.CudaAssert.tap = False
    shell.run_line_magic("load_ext", "cudaassert")
    shell.run_line_magic("reload_ext", "cudaassert")
    shell.run_line_magic("reload_ext", "cudaassert")
    assert _count_hooks(shell) == 2
    assert registry.count() == 1
    capsys.readouterr()
    shell.run_cell(BAD_LABEL)
    assert capsys.readouterr().out.count(REPORTED) == 1


def test_unload_is_idempotent(shell):
    shell.config.CudaAssert.tap = False
    before = _snapshot(shell)
    shell.run_line_magic("load_ext", "cudaassert")
    extension.unload(shell)
    extension.unload(shell)
    assert _snapshot(shell) == before


def test_load_unload_load_works_again(shell, capsys):
    shell.config.CudaAssert.tap = False
    for _ in range(2):
        shell.run_line_magic("load_ext", "cudaassert")
        assert extension.current(shell) is not None
        capsys.readouterr()
        shell.run_cell(BAD_LABEL)
        assert capsys.readouterr().out.count(REPORTED) == 1
        shell.run_line_magic("unload_ext", "cudaassert")
        assert extension.current(shell) is None
        shell.run_cell(BAD_LABEL)
        shown = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # IPython's own traceback, colours off
        assert "IndexError: Target 3 is out of bounds." in shown and "[cudaassert]" not in shown


def test_settings_are_traitlets_reachable_with_config_magic(loaded, shell, capsys):
    shell.run_line_magic("config", "CudaAssert.enabled = False")
    assert loaded.config.enabled is False
    shell.run_line_magic("config", "CudaAssert")
    out = capsys.readouterr().out
    assert "CudaAssert.tail_bytes" in out and "CudaAssert.panel" in out


def test_loading_imports_neither_torch_nor_ipywidgets_nor_touches_cuda():
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'cudaassert')\n"
        "ip.run_cell('x = 1')\n"
        "bad = [m for m in ('torch', 'ipywidgets', 'pynvml') if m in sys.modules]\n"
        "print('IMPORTED', bad)\n"
        "ip.run_line_magic('unload_ext', 'cudaassert')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "IMPORTED []" in out.stdout, out.stdout + out.stderr


#: what only an error, a DataLoader iteration or a validator needs: %load_ext and a cell that raises nothing leave
#: them unimported (each cost bench_core's 50 ms goal milliseconds: dataclasses, the adapter table, the fix words)
DEFERRED = (
    "cudaassert_ipy.frameworks",
    "cudaassert_ipy.diagnose",
    "cudaassert_ipy.data.loaders",
    "cudaassert_ipy.data.batch_record",
    "cudaassert_ipy.checks.errors",
)


def test_loading_and_a_cell_leave_what_only_an_error_or_a_batch_needs_unimported():
    code = (
        "import sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'cudaassert')\n"
        "ip.run_cell('x = 1')\n"
        f"print('IMPORTED', sorted(m for m in sys.modules if m.startswith({DEFERRED!r})))\n"
        "ip.run_line_magic('unload_ext', 'cudaassert')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "IMPORTED []" in out.stdout, out.stdout + out.stderr


def test_status_says_loaded_alive_and_tap_state(loaded, shell, capsys):
    shell.run_line_magic("cudaassert", "status")
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "cudaassert: loaded",
        "GPU context: alive (no sticky CUDA error seen)",
        "fd tap: off",
        "validators: off in this thread",
        "DataLoader bookmark: on (nothing recorded yet)",
    ]


def test_explain_before_any_failure_says_so(loaded, shell, capsys):
    shell.run_line_magic("cudaassert", "explain")
    assert capsys.readouterr().out.strip() == "No CUDA failure has been diagnosed in this kernel yet."


def test_off_and_on_toggle_reports(loaded, shell, capsys):
    shell.run_line_magic("cudaassert", "off")
    assert loaded.config.enabled is False
    shell.run_line_magic("cudaassert", "on")
    assert loaded.config.enabled is True
    assert capsys.readouterr().out.splitlines() == ["cudaassert reports are off.", "cudaassert reports are on."]


@pytest.mark.parametrize(
    "line, fix",
    [
        ("", "the following arguments are required: verb"),
        ("frobnicate", "invalid choice: 'frobnicate'"),
        ("status on", "`%cudaassert status` takes no value; did you mean `%cudaassert validators on`?"),
        ("validators", "Say which: `%cudaassert validators on` or `%cudaassert validators off`."),
        ("validators maybe", "`%cudaassert validators maybe`: say `on` or `off`."),
        ("status --cpu", "--cpu only goes with `%cudaassert restart`."),
    ],
)
def test_misuse_raises_usage_error_with_the_fix(loaded, shell, line, fix):
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("cudaassert", line)
    assert fix in str(err.value)


# -- the whole footprint, with the fd tap on, in a fresh and in a resumed kernel --------------------------
# A separate process (pytest's own fd capture must not be re-plumbed), with plain IPython: the tap, the
# dead-context printer (the GPU double kills the pretend context), validators, the resume plan, the stub's
# claim and the Replayer's hook all take part; after `%unload_ext cudaassert` IPython must be as found.
# Deliberately not compared: os.environ keys a resume plan sets (CUDA_LAUNCH_BLOCKING is read once, at
# CUDA's start, so unsetting it would only lie to child processes) and the user's namespace.
FOOTPRINT = r'''
import json, os, subprocess, sys, threading
from IPython.core.interactiveshell import InteractiveShell
from cudaassert_ipy.shell import registry

ip = InteractiveShell.instance()
for name in ("load_ext", "unload_ext", "reload_ext", "config"):
    ip.find_line_magic(name)

def snapshot(skip_env=()):
    fmt = ip.display_formatter.formatters
    torch = sys.modules.get("torch")
    return {
        "events": {e: [repr(c) for c in cbs] for e, cbs in ip.events.callbacks.items()},
        "magics": {k: sorted(v) for k, v in ip.magics_manager.magics.items()},
        "registry": sorted(ip.magics_manager.registry),
        "configurables": [id(c) for c in ip.configurables],
        "formatters": {m: [sorted(map(repr, f.type_printers)), sorted(map(repr, f.deferred_printers))]
                       for m, f in fmt.items()},
        "loaded": sorted(ip.extension_manager.loaded),
        "fds": {fd: list(os.fstat(fd)[:3]) for fd in (0, 1, 2)},
        "threads": sorted(t.name for t in threading.enumerate()),
        "env": {k: v for k, v in os.environ.items() if k not in skip_env},
        "extensions": registry.count(),
        "function_modes": torch._C._len_torch_function_stack() if torch is not None else 0,
        "meta_path": [type(f).__name__ for f in sys.meta_path],
        "after_fork": ours_after_fork(),
    }

def ours_after_fork():
    """Our callbacks in multiprocessing's after-fork registry (shell/forks.py): process state, like the fds."""
    util = sys.modules.get("multiprocessing.util")
    return sorted(k[2].__qualname__ for k in getattr(util, "_afterfork_registry", {}).keys()
                  if k[2].__module__.startswith("cudaassert_ipy"))

def diff(a, b):
    return {k: (a[k], b[k]) for k in a if a[k] != b[k]}

def story():
    assert ip.run_cell("import torch\nfrom fake_cuda_session import make_batch, cross_entropy\n"
                       "logits, labels = make_batch()", store_history=True).success
    assert not ip.run_cell("loss = cross_entropy(logits, labels)", store_history=True).success
    assert ip.find_line_magic("cudaassert").__self__.ext.state.dead

case = sys.argv[1]
before = snapshot()
ip.run_line_magic("load_ext", "cudaassert")
assert registry.active(ip).tap is not None, "the fd tap must be on for this test"
story()
if case == "fresh":
    ip.run_line_magic("unload_ext", "cudaassert")
    print(json.dumps(diff(before, snapshot())))
    sys.exit(0)
ip.run_line_magic("cudaassert", "restart")  # a terminal: the plan is armed
ip.run_line_magic("unload_ext", "cudaassert")  # the old kernel ends
plans = os.path.join(os.environ["JUPYTER_RUNTIME_DIR"], "cudaassert")
(plan,) = [os.path.join(plans, n) for n in os.listdir(plans) if n.startswith("plan-")]
data = json.load(open(plan))
gone = subprocess.Popen(["true"])
gone.wait()
data["writer_pid"] = gone.pid  # the writer is gone, as after a restart
with open(plan, "w") as f:
    json.dump(data, f)
ip.reset(new_session=False)
before = snapshot()
stub = os.path.join(ip.profile_dir.startup_dir, "00-cudaassert-resume.py")
exec(compile(open(stub).read(), stub, "exec"), ip.user_ns)
ext = registry.active(ip)
assert ext is not None and ext.resumed is not None and not os.path.exists(plan), "the plan was not claimed"
if case == "resumed-replayed":
    ip.run_cell("x = 1", store_history=True)  # the Replayer runs, turns validators on, and removes itself
    assert ext.resumed.report["replayed"] == 1 and ext.validators_on()
ip.run_line_magic("unload_ext", "cudaassert")
print(json.dumps(diff(before, snapshot(skip_env=("CUDA_LAUNCH_BLOCKING", "CUDAASSERT_VALIDATORS")))))
'''


@pytest.mark.parametrize("case", ["fresh", "resumed-before-its-first-cell", "resumed-replayed"])
def test_unload_leaves_ipython_exactly_as_found_with_the_tap_on_also_in_a_resumed_kernel(tmp_path, case):
    from helpers import TESTS, kernel_env

    env = kernel_env(
        JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"), IPYTHONDIR=str(tmp_path / "ipython"), CUDAASSERT_TEST_PRETEND_GPU="1"
    )
    out = subprocess.run(
        [sys.executable, "-c", FOOTPRINT, case], capture_output=True, text=True, timeout=180, env=env, cwd=TESTS
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "{}", out.stdout[-3000:]
