"""A torch that lacks a private API we read costs that one feature: one line in `%cudaassert status`, the rest works.

Each test takes the API away in a fresh Python (a real torch, the attribute deleted the way a future release would
drop or rename it), loads the extension in a real InteractiveShell, and checks the status line, that the feature is
off without a traceback of ours, and that a CPU twin's report still arrives.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from helpers import ROOT, TESTS

SHELL = """
import sys
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "cudaassert")
def cell(code):
    result = ip.run_cell(code)
    sys.stdout.flush()
    return result
"""

CPU_TWIN = """
import torch, torch.nn.functional as F
F.cross_entropy(torch.randn(4, 5), torch.tensor([0, 7, 1, 2]))
"""


def _python(script: str, *, ipython_dir: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["IPYTHONDIR"] = ipython_dir
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=180, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _assert_report_still_arrives(out: str) -> None:
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert "Target 7 is out of bounds." in out


def test_every_feature_is_available_on_this_torch(tmp_path):
    out = _python(
        SHELL
        + """
import torch
from cudaassert_ipy.checks import torch_compat
print("REASONS", {f: torch_compat.reason(f) for f in torch_compat.FEATURES})
print("LINES", torch_compat.status_lines())
""",
        ipython_dir=str(tmp_path),
    )
    assert "REASONS {'validators': None, 'bookmark': None}" in out
    assert "LINES []" in out


def test_importing_it_imports_neither_torch_nor_any_module_of_ours(tmp_path):
    out = _python(
        """
import sys
import cudaassert_ipy.checks  # the layer it lives in (light: no torch); what the probe module adds is counted
before = set(sys.modules)
import cudaassert_ipy.checks.torch_compat
print("NEW", sorted(m for m in set(sys.modules) - before if m.startswith(("torch", "cudaassert_ipy."))))
""",
        ipython_dir=str(tmp_path),
    )
    assert "NEW ['cudaassert_ipy.checks.torch_compat']" in out


def test_status_imports_no_torch_and_reports_nothing_before_torch(tmp_path):
    out = _python(
        SHELL
        + """
cell("%cudaassert status")
print("TORCH LOADED", "torch" in sys.modules)
""",
        ipython_dir=str(tmp_path),
    )
    assert "TORCH LOADED False" in out
    assert "validators: off in this thread" in out
    assert "the rest of cudaassert works" not in out


def test_a_torch_without_the_mode_stack_turns_the_validators_off_with_one_line(tmp_path):
    out = _python(
        SHELL
        + """
import torch
del torch._C._len_torch_function_stack  # what a release that renamed it would look like to us
cell("%cudaassert validators on")
cell("%cudaassert status")
cell("%%cuda_debug\\nx = 1")
from cudaassert_ipy.checks import validators_enabled
print("ENABLED", validators_enabled())
"""
        + f"cell({CPU_TWIN!r})",
        ipython_dir=str(tmp_path),
    )
    line = "validators: off - torch {v}: torch._C._len_torch_function_stack is missing; the rest of cudaassert works"
    import torch

    assert line.format(v=torch.__version__) in out
    assert out.count("torch._C._len_torch_function_stack is missing") == 3  # on, status, %%cuda_debug: once each
    assert "UsageError: %%cuda_debug needs the validators; validators: off" in out
    assert "cudaassert validators are on" not in out
    assert "ENABLED False" in out
    assert "/cudaassert_ipy/" not in out  # no frame of ours anywhere: no traceback from our code
    _assert_report_still_arrives(out)


def test_a_torch_whose_dataloader_iterator_was_renamed_turns_the_bookmark_off_with_one_line(tmp_path):
    out = _python(
        """
import torch.utils.data.dataloader as dl
del dl._BaseDataLoaderIter  # a release that renamed the base iterator; DataLoader itself still works
"""
        + SHELL
        + """
cell("from torch.utils.data import DataLoader\\nbatches = [b for b in DataLoader(list(range(6)), batch_size=2)]")
cell("%cudaassert status")
"""
        + f"cell({CPU_TWIN!r})",
        ipython_dir=str(tmp_path),
    )
    import torch

    assert (
        f"DataLoader bookmark: off - torch {torch.__version__}: "
        "torch.utils.data.dataloader._BaseDataLoaderIter.__next__ is missing"
    ) in out
    assert "validators: off in this thread" in out  # the other feature is untouched
    assert "/cudaassert_ipy/" not in out
    _assert_report_still_arrives(out)


def test_an_iterator_that_stopped_setting_an_attribute_we_read_turns_the_bookmark_off(tmp_path):
    out = _python(
        """
import torch.utils.data.dataloader as dl
init = dl._BaseDataLoaderIter.__init__
def __init__(self, loader):  # a release whose iterator keeps its sampler's iterator under another name
    init(self, loader)
dl._BaseDataLoaderIter.__init__ = __init__
from cudaassert_ipy.checks import torch_compat
print("REASON", torch_compat.reason("bookmark"))
print("VALIDATORS", torch_compat.reason("validators"))
""",
        ipython_dir=str(tmp_path),
    )
    assert (
        "REASON torch " in out
        and "torch.utils.data.dataloader._BaseDataLoaderIter.__init__ no longer uses "
        "_sampler_iter, _num_yielded, _dataset_kind, _dataset, _index_sampler, _collate_fn"
    ) in out
    assert "VALIDATORS None" in out


def test_a_probe_that_fails_unexpectedly_turns_only_its_feature_off(tmp_path):
    out = _python(
        """
import torch.overrides
class Odd:
    def __getattr__(self, name):
        raise RuntimeError("odd torch")
torch.overrides._push_mode = Odd()
from cudaassert_ipy.checks import torch_compat
print("REASON", torch_compat.reason("validators"))
print("BOOKMARK", torch_compat.reason("bookmark"))
""",
        ipython_dir=str(tmp_path),
    )
    assert "torch.overrides._push_mode is not callable" in out
    assert "BOOKMARK None" in out
