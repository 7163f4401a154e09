"""Keras 3 for real, on the torch backend on the CPU: ``Dense(3)`` with sparse categorical cross-entropy and a label 3.

The CPU twin (``model.fit``) runs through the loaded extension: Keras filters its own frames out of the
traceback. On a GPU the first sync after the assert is swallowed (``pythonify_logs``) and the error surfaces
at the next step's first kernel, inside ``Dense.call``: Keras re-creates it there (``e.__class__(message)``,
the original wrapped in ANSI bold, ``from None``). ``gpu_double_async.DeadGpu`` replays that: the loss's kernel
asserts (its lines on fd 2) and the next ``matmul`` raises. The report must read the original, not call the
re-created copy a later error, take the facts from the user's ``keras.Model``, word the fix ``Dense(N)`` and
say how to see Keras' frames. Runs in the frameworks environment with ``KERAS_BACKEND=torch``:
``KERAS_BACKEND=torch .venv-fw/bin/python -m pytest -m frameworks
tests/test_frameworks_keras.py``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers.cells import diagnose_cell

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure
from cudaassert_ipy.frameworks import keras as keras_adapter
from cudaassert_ipy.view.report import to_text

pytestmark = pytest.mark.frameworks

KERAS_FIX = (
    "the labels reach 3 with 3 classes: if you have 4 classes, make the last layer Dense(4); if labels start "
    "at 1, subtract 1"
)
FILTERED = hints.FRAMEWORK_ADVICE["keras_filtered"]

SETUP = """
import warnings
import numpy as np
import torch
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import keras
assert keras.backend.backend() == "torch", keras.backend.backend()
from gpu_double_async import DeadGpu

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = torch.randn(8, 8)
y = torch.tensor([0, 1, 2, 3, 0, 1, 2, 0])  # class 3 is new: the last layer has 3 units
"""
FIT = "model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False)"


@pytest.fixture
def kr(shell: Any) -> Any:
    assert os.environ.get("KERAS_BACKEND") == "torch", "run with KERAS_BACKEND=torch"
    result = shell.run_cell(SETUP, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    return shell


def test_fit_on_the_cpu_with_label_3_gets_the_dense_fix_and_the_models_facts(kr, loaded, capsys):
    capsys.readouterr()
    result = kr.run_cell(FIT, store_history=True)
    assert isinstance(result.error_in_exec, IndexError)
    out = capsys.readouterr().out
    assert "[cudaassert] CPU error · class label out of range in cross_entropy" in out
    assert "Cause: cross_entropy got class label 3, but the input has 3 classes (shape (4, 3))" in out
    assert f"Likely fix: {KERAS_FIX}." in out
    assert "  model.layers[-1]: Dense(units=3, activation=linear)" in out
    assert "  model.loss: sparse_categorical_crossentropy(from_logits=True, axis=-1)" in out
    assert f"Note: {FILTERED}" in out


def test_the_patch_widens_the_last_dense_of_the_sequential_list(loaded, kr):  # loaded first: SETUP in its history
    import cudaassert_ipy

    kr.run_cell(FIT, store_history=True)
    alt = cudaassert_ipy.proposed_fix().alternatives[0]
    assert alt.key == "widen_head" and alt.title == "make the last layer Dense(4)"
    assert (
        '+model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), '
        "keras.layers.Dense(4)])" in alt.patch.diff
    )


def test_a_gpu_failure_recreated_by_dense_call_is_read_through_and_is_not_a_later_error(kr, capfd):
    error, d = diagnose_cell(kr, f"with DeadGpu(surfaces={{torch.matmul}}):\n    {FIT}", capfd)
    assert type(error).__name__ == "AcceleratorError" and not hasattr(error, "error_code")  # Keras' copy
    assert str(error).startswith("Exception encountered when calling Dense.call().\n\n\x1b[1mCUDA error: device-side")
    assert error.__suppress_context__ and error.__context__ is not None
    assert d.kind == "device_assert" and d.cause_id == "nll_loss_target_out_of_range"
    assert d.exception_line == "AcceleratorError: CUDA error: device-side assert triggered"
    assert d.follow_ons == ()  # the re-created copy is the same failure
    assert d.specific is not None and d.specific.startswith(
        "cross_entropy got class label 3, but `model.layers[-1]` has units=3, so labels must be 0..2."
    )
    assert d.likely_fix == KERAS_FIX
    assert dict(d.facts)["model.layers[-1]"] == "Dense(units=3, activation=linear)"
    assert FILTERED in d.notes
    text = to_text(d)
    assert "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 4 threads" in text


def test_with_traceback_filtering_off_the_report_does_not_ask_for_it(kr, capfd):
    kr.run_cell("keras.config.disable_traceback_filtering()", store_history=True)
    try:
        _, d = diagnose_cell(kr, f"with DeadGpu(surfaces={{torch.matmul}}):\n    {FIT}", capfd)
    finally:
        kr.run_cell("keras.config.enable_traceback_filtering()", store_history=True)
    assert d.likely_fix == KERAS_FIX and FILTERED not in d.notes


def test_a_model_whose_layers_cannot_be_read_is_one_could_not_read_line_and_the_rest_stands(kr, loaded, capsys):
    kr.run_cell(
        """
class Remote(keras.Sequential):
    \"\"\"A model whose layer list lives on a service that closes when training stops.\"\"\"
    closed = False

    @property
    def layers(self):
        if self.closed:
            raise RuntimeError("layer service closed")
        return super().layers

    def fit(self, *args, **kwargs):
        try:
            return super().fit(*args, **kwargs)
        finally:
            self.closed = True

model = Remote([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])
model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
""",
        store_history=True,
    )
    capsys.readouterr()
    kr.run_cell(FIT, store_history=True)
    out = capsys.readouterr().out
    assert (
        "Note: Could not read model.layers (RuntimeError: layer service closed); the rest of this report stands." in out
    )
    assert "Cause: cross_entropy got class label 3, but the input has 3 classes (shape (4, 3))" in out
    assert "  model.loss: sparse_categorical_crossentropy(from_logits=True, axis=-1)" in out


@pytest.mark.parametrize(
    ("text", "own"),
    [
        (
            "Exception encountered when calling Dense.call().\n\n"
            "\x1b[1mCUDA error: device-side assert triggered\x1b[0m\n\n"
            "Arguments received by Dense.call():\n  • inputs=torch.Tensor(shape=torch.Size([4, 16]), dtype=float32)",
            "CUDA error: device-side assert triggered",
        ),
        ("\x1b[1mTarget 3 is out of bounds.\x1b[0m", "Target 3 is out of bounds."),
        ("Target 3 is out of bounds.", None),
    ],
)
def test_unwrap_reads_the_original_message_out_of_keras_wrapper(text, own):
    assert keras_adapter.ADAPTER.unwrap is not None
    assert keras_adapter.ADAPTER.unwrap(RuntimeError(text), text) == own


def test_one_fix_on_every_path_the_twin_the_gpu_the_validator_and_preflight(kr, capfd):
    import torch

    from cudaassert_ipy.checks import ValidationError, validators
    from cudaassert_ipy.checks.preflight import preflight

    def post_mortem(error: BaseException, stderr: str = "") -> str | None:
        detection, sites = read_failure(error, stderr)
        assert detection is not None
        return diagnose_failure(detection, sites, stderr, "", None, kr.user_ns)[1].likely_fix

    def fit_error() -> BaseException:
        result = kr.run_cell(FIT, store_history=True)
        assert result.error_in_exec is not None
        return result.error_in_exec

    twin = post_mortem(fit_error())
    _, d = diagnose_cell(kr, f"with DeadGpu(surfaces={{torch.matmul}}):\n    {FIT}", capfd)
    with validators():
        stop = fit_error()
    assert isinstance(stop, ValidationError), stop
    dataset = torch.utils.data.TensorDataset(kr.user_ns["x"], kr.user_ns["y"])
    report = preflight(dataset, model=kr.user_ns["model"], progress=False)
    assert twin == d.likely_fix == stop.hint == post_mortem(stop) == report.labels_fix == KERAS_FIX
