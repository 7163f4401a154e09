"""%%cuda_debug: one cell with validators on, an optional sync after each torch call and a NaN/inf
guard; the user's namespace and line numbers are kept and everything is restored afterwards."""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, magics_class
from torch.overrides import _get_current_function_mode_stack

from cudaassert_ipy.base.wording import is_cell_filename
from cudaassert_ipy.checks import (
    NonFiniteError,
    ValidationIndexError,
    debug_mode,
    disable_validators,
    enable_validators,
    validators_enabled,
)
from cudaassert_ipy.shell import debug_cell


@magics_class
class DebugMagics(Magics):
    """The thin shell the extension registers (same code as in cudaassert_ipy.shell.magics)."""

    @debug_cell.debug_magic_arguments
    @cell_magic
    def cuda_debug(self, line: str, cell: str) -> None:
        options = debug_cell.parse_debug_args(line)
        debug_cell.run_debug_cell(self.shell, cell, sync=options.sync, nan=options.nan)


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.reset()
    ip.register_magics(DebugMagics)
    ip.run_cell("import torch, torch.nn.functional as F")
    disable_validators()
    yield ip
    ip.magics_manager.magics["cell"].pop("cuda_debug", None)
    ip.reset()
    disable_validators()
    assert _get_current_function_mode_stack() == []


def cell_frame(error: BaseException, shell: InteractiveShell) -> traceback.FrameSummary:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if debug_cell.is_shell_cell(f.filename, shell)]
    return frames[-1]


# ---------------------------------------------------------------- options
def test_options_parse_and_default_to_off() -> None:
    plain = debug_cell.parse_debug_args("")
    both = debug_cell.parse_debug_args("--sync --nan")
    assert (plain.sync, plain.nan) == (False, False)
    assert (both.sync, both.nan) == (True, True)


@pytest.mark.parametrize("line", ["--bogus", "now", "--sync=1"])
def test_bad_options_are_a_usage_error_with_the_usage_line(line: str) -> None:
    with pytest.raises(UsageError) as info:
        debug_cell.parse_debug_args(line)
    message = str(info.value)
    assert message.startswith("%%cuda_debug: ")
    assert message.endswith("Usage: %%cuda_debug [--sync] [--nan] (see %%cuda_debug? for what each option does).")


def test_the_magic_help_documents_both_options() -> None:
    doc = debug_cell.DEBUG_MAGIC_DOC
    assert "[--sync] [--nan]" in doc
    assert "torch.cuda.synchronize()" in doc and "CUDA_LAUNCH_BLOCKING=1" in doc
    assert "NaN" in doc and "cell line" in doc
    assert "--sync" in (DebugMagics.cuda_debug.__doc__ or "")


# ---------------------------------------------------------------- running the cell
def test_validators_catch_a_bad_call_at_the_cells_own_line_and_are_removed_afterwards(
    shell: InteractiveShell,
) -> None:
    cell = "x = torch.randn(4, 5)\nF.cross_entropy(x, torch.tensor([0, 1, 2, 5]))\n"
    with pytest.raises(ValidationIndexError) as info:
        debug_cell.run_debug_cell(shell, cell)
    frame = cell_frame(info.value, shell)
    assert frame.lineno == 3  # line 1 is the %%cuda_debug line, as on screen
    assert frame.line == "F.cross_entropy(x, torch.tensor([0, 1, 2, 5]))"
    assert shell.user_ns["x"].shape == (4, 5)  # ran in the user's namespace
    assert not validators_enabled()
    assert _get_current_function_mode_stack() == []


def test_the_magic_reports_the_error_as_the_cells_error(shell: InteractiveShell) -> None:
    result = shell.run_cell("%%cuda_debug\nF.one_hot(torch.tensor([3]), 3)\n")
    assert isinstance(result.error_in_exec, RuntimeError)
    assert result.error_in_exec.cause_id == "scatter_gather_index_out_of_range_v1"


def test_validators_already_on_stay_on(shell: InteractiveShell) -> None:
    enable_validators()
    debug_cell.run_debug_cell(shell, "y = 1\n")
    assert validators_enabled()


def test_the_last_expression_is_displayed_and_cell_magics_inside_still_work(shell: InteractiveShell) -> None:
    result = shell.run_cell("%%cuda_debug --nan\nz = torch.ones(3)\nz.sum().item() + 1\n")
    assert result.error_in_exec is None
    assert shell.user_ns["_"] == 4.0
    debug_cell.run_debug_cell(shell, "%time w = 2\n")
    assert shell.user_ns["w"] == 2


def test_everything_is_restored_after_keyboard_interrupt(shell: InteractiveShell) -> None:
    with pytest.raises(KeyboardInterrupt):
        debug_cell.run_debug_cell(shell, "a = torch.ones(2) * 2\nraise KeyboardInterrupt\n", sync=True, nan=True)
    assert _get_current_function_mode_stack() == []
    assert not validators_enabled()


def test_top_level_await_is_a_usage_error(shell: InteractiveShell) -> None:
    with pytest.raises(UsageError, match="cannot run a cell with top-level await"):
        debug_cell.run_debug_cell(shell, "import asyncio\nawait asyncio.sleep(0)\n")


# ---------------------------------------------------------------- --nan
def test_nan_guard_stops_at_the_call_that_made_the_first_inf(shell: InteractiveShell) -> None:
    shell.execution_count = 7
    cell = "a = torch.tensor([1.0, 0.0])\nb = a.log()\nc = b * 2\n"
    with pytest.raises(NonFiniteError) as info:
        debug_cell.run_debug_cell(shell, cell, nan=True)
    error = info.value
    assert (error.op, error.n_nan, error.n_inf, error.lineno, error.inputs_finite) == ("Tensor.log", 0, 1, 3, True)
    assert str(error) == (
        "Tensor.log produced 1 inf in its output (shape (2,), dtype float32) at cell In[7], line 3: b = a.log().\n"
        "Its tensor inputs were all finite, so this call created the first NaN/inf.\n"
        "Likely fix: log of a value <= 0: clamp the input first (x.clamp_min(eps)) or use log1p/log_softmax; "
        "otherwise " + debug_mode.GENERIC_NAN_HINT
    )
    assert "c" not in shell.user_ns  # stopped at line 3
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy)) == (NonFiniteError, str(error))


def test_nan_guard_names_the_module_and_says_when_inputs_were_already_bad(shell: InteractiveShell) -> None:
    cell = (
        "lin = torch.nn.Linear(2, 2)\n"
        "with torch.no_grad():\n"
        "    lin.weight[0, 0] = float('nan')\n"
        "out = lin(torch.ones(1, 2))\n"
    )
    with pytest.raises(NonFiniteError) as info:
        debug_cell.run_debug_cell(shell, cell, nan=True)
    error = info.value
    assert error.op == "F.linear (inside nn.Linear)"
    assert (error.lineno, error.line, error.n_nan, error.inputs_finite) == (5, "out = lin(torch.ones(1, 2))", 1, False)
    assert "One of its tensor inputs already held NaN/inf before this call" in str(error)


def test_nan_guard_ignores_uninitialised_memory_and_views(shell: InteractiveShell) -> None:
    # torch.empty(out=...) / resize_ hand back the bytes already there: NaN here, as garbage can be by chance
    # (nn.Linear's own torch.empty once tripped the guard in CI). Views of bad memory made nothing either.
    shell.user_ns["buf"] = torch.full((4,), float("nan"))
    cell = "e = torch.empty(4, out=buf)\nr = buf.resize_(4)\nv = buf[:2].view(2, 1).t()\nw = v * 2\n"
    with pytest.raises(NonFiniteError) as info:
        debug_cell.run_debug_cell(shell, cell, nan=True)
    error = info.value
    assert (error.lineno, error.line, error.n_nan, error.inputs_finite) == (5, "w = v * 2", 2, False)
    assert "v" in shell.user_ns and "w" not in shell.user_ns


def test_nan_guard_still_names_in_place_and_out_writes(shell: InteractiveShell) -> None:
    shell.user_ns["x"] = torch.tensor([-1.0, 1.0])
    with pytest.raises(NonFiniteError) as info:
        debug_cell.run_debug_cell(shell, "x.log_()\n", nan=True)
    assert (info.value.op, info.value.n_nan) == ("Tensor.log_", 1)
    shell.user_ns["y"] = torch.zeros(2)
    with pytest.raises(NonFiniteError) as info:
        debug_cell.run_debug_cell(shell, "torch.log(torch.tensor([-1.0, 2.0]), out=y)\n", nan=True)
    assert (info.value.op, info.value.n_nan) == ("torch.log", 1)


def test_nan_guard_ignores_finite_and_integer_results(shell: InteractiveShell) -> None:
    debug_cell.run_debug_cell(shell, "i = torch.arange(3) // 1\nf = torch.randn(3).exp()\n", nan=True)
    assert shell.user_ns["i"].tolist() == [0, 1, 2]


def test_nan_guard_on_ipython_7_style_cell_names() -> None:
    assert is_cell_filename("<ipython-input-3-0123abcd>")
    assert is_cell_filename("/tmp/ipykernel_4242/1234567.py")
    assert not is_cell_filename("/usr/lib/python3/site-packages/torch/nn/functional.py")


# ---------------------------------------------------------------- --sync
def test_sync_does_nothing_for_cpu_results(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: Any) -> None:
        raise AssertionError("synchronize called for CPU tensors")

    monkeypatch.setattr(torch.cuda, "synchronize", forbidden)
    debug_cell.run_debug_cell(shell, "s = (torch.ones(3) * 2).sum()\n", sync=True)
    assert shell.user_ns["s"].item() == 6.0
