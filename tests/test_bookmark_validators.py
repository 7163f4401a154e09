"""Validator messages name the dataset sample when the checked tensor is a copy of a recorded batch field."""

from __future__ import annotations

import pickle

import pytest
from helpers.kernels import execute, running_kernel

from cudaassert_ipy.checks.errors import ValidationIndexError
from cudaassert_ipy.checks.sample_naming import SAMPLE_NAMING

SETUP = """
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
class Birds(Dataset):
    def __init__(self):
        self.y = torch.arange(400) % 195
        self.y[41] = 195
    def __len__(self):
        return 400
    def __getitem__(self, i):
        return torch.randn(8), self.y[i]
train_ds = Birds()
model = nn.Linear(8, 195)
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
"""

# .clone() stands in for .to("cuda"): a new tensor of the field's shape; the recorded CPU field stays as it was
LOOP = """
for i, (images, targets) in enumerate(train_loader):
    loss = F.cross_entropy(model(images), targets.clone())
"""

# batch 1 of the seeded shuffle holds sample 41 at position 28
LINE = "From the DataLoader: target[28]=195 → `train_ds[41]` (batch 1 of epoch 0 from `train_loader`)."


def _stop(shell, loop: str = LOOP) -> str:
    shell.run_cell(SETUP, store_history=True)
    shell.run_line_magic("cudaassert", "validators on")
    result = shell.run_cell(loop, store_history=True)
    assert isinstance(result.error_in_exec, ValidationIndexError), result.error_in_exec
    return str(result.error_in_exec)


def test_a_validator_stop_on_a_copy_of_a_recorded_field_names_the_dataset_index_and_the_batch(loaded, shell):
    message = _stop(shell)
    assert message.splitlines()[1] == LINE
    assert message.splitlines()[0].endswith("First bad: target[28]=195.")


def test_a_tensor_of_the_same_shape_with_other_values_names_no_sample(loaded, shell):
    loop = (
        "for i, (images, targets) in enumerate(train_loader):\n"
        "    other = torch.zeros_like(targets); other[3] = 195\n"
        "    loss = F.cross_entropy(model(images), other)\n"
    )
    message = _stop(shell, loop)
    assert "First bad: target[3]=195." in message
    assert "From the DataLoader" not in message


def test_without_the_bookmark_the_message_has_no_sample_line(shell):
    shell.config.CudaAssert.tap = False
    shell.config.CudaAssert.bookmark = False
    shell.run_line_magic("load_ext", "cudaassert")
    assert SAMPLE_NAMING.current() is None
    assert "From the DataLoader" not in _stop(shell)


def test_unloading_removes_the_lookup_the_validators_read(loaded, shell):
    assert SAMPLE_NAMING.current() is not None
    shell.run_line_magic("unload_ext", "cudaassert")
    assert SAMPLE_NAMING.current() is None


def test_the_sample_line_survives_pickling_for_worker_processes(loaded, shell):
    error = pickle.loads(pickle.dumps(shell.run_cell(SETUP + "\n%cudaassert validators on\n" + LOOP).error_in_exec))
    assert error.sample_line == LINE
    assert str(error).splitlines()[1] == LINE


@pytest.mark.kernel
def test_cuda_debug_in_a_real_kernel_names_the_dataset_index_in_the_validator_error():
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        execute(kc, SETUP)
        reply, _ = execute(kc, "%%cuda_debug\n" + LOOP)
    assert reply["status"] == "error"
    assert reply["ename"] == "ValidationIndexError"
    assert reply["evalue"].splitlines()[1] == LINE
