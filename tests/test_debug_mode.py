"""checks/debug_mode.py: %%cuda_debug's guard as a plain TorchFunctionMode, without IPython.

The magic's own tests (tests/test_debug_cell.py) run it through a shell; here the mode is used directly, with
the cell line it is given by ``locate``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest
import torch

from cudaassert_ipy.checks import NonFiniteError
from cudaassert_ipy.checks.debug_mode import DebugMode


def test_sync_failure_is_raised_at_the_launching_call_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(device: Any = None) -> None:
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(torch.cuda, "synchronize", failing)
    mode = DebugMode(sync=True, nan=False)
    fake_cuda_result = types.SimpleNamespace(is_cuda=True, device="cuda:0")
    with pytest.raises(RuntimeError) as info:
        mode._synchronize(torch.add, [fake_cuda_result])
    note = "%%cuda_debug --sync: this error surfaced in the synchronisation right after torch.add"
    if sys.version_info >= (3, 11):
        assert any(n.startswith(note) for n in info.value.__notes__)


def test_the_nan_guard_needs_no_shell_and_names_the_line_locate_gives() -> None:
    line = ("/tmp/ipykernel_1/1.py", 3, "b = a.log()", "cell In[7]")
    a = torch.tensor([1.0, 0.0])
    with pytest.raises(NonFiniteError) as info, DebugMode(sync=False, nan=True, locate=lambda: line):
        a.log()
    assert (info.value.op, info.value.n_inf, info.value.lineno, info.value.inputs_finite) == ("Tensor.log", 1, 3, True)
    assert str(info.value).startswith(
        "Tensor.log produced 1 inf in its output (shape (2,), dtype float32) at cell In[7], line 3: b = a.log().\n"
    )
