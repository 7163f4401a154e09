"""Errors we do not diagnose keep the traceback they have without the extension: no frame of ours in it.

Every patched or wrapped callable is covered: the DataLoader bookmark (``__next__``, the worker
iterator's ``_next_index``), the import hook that installs it, the validators' mode and its
``zero_grad`` wrapper, and ``%%cuda_debug``. Checked in-process on the traceback objects, in a real
kernel (what the notebook shows, 0 and 2 workers) and under the script runner (what stderr shows).
"""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import textwrap
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers import kernel_env
from helpers.kernels import execute, running_kernel
from helpers.own_frames import OURS, PY310_KEEPS_OUR_FRAME, no_frame_of_ours
from torch.utils.data import DataLoader, Dataset

import cudaassert_ipy
from cudaassert_ipy.base.passthrough import drop_own_frame, hide_own_frames
from cudaassert_ipy.data.after_import import AfterImport
from cudaassert_ipy.data.bookmark import Bookmark

# PY310_KEEPS_OUR_FRAME (helpers/own_frames.py): on Python 3.10 a frame of ours stays in-process and in IPython,
# and only that failure (OurFrameShown, from no_frame_of_ours) is the expected one. Strict: a 3.10 that passes is news.


def _trace(action: Callable[[], Any], then: Callable[[BaseException], None] | None = None) -> str:
    """The traceback Python would print for ``action``'s error (from the frame that called it), after ``then``."""
    try:
        action()
    except BaseException as error:
        if then is not None:
            then(error)
        return "".join(traceback.format_exception(type(error), error, error.__traceback__))
    finally:
        _settle_dropped_workers()
    raise AssertionError("no error raised")


def _settle_dropped_workers() -> None:
    """Let a dropped DataLoader iterator's queues finish closing before the next one starts: multiprocessing's feeder
    thread can close its pipe after torch already did, and under load that fd number may by then belong to the next
    iterator's new pipe (its workers then fail to start with EBADF, with or without the extension)."""
    gc.collect()
    for thread in threading.enumerate():
        if thread.name == "QueueFeederThread" and thread is not threading.current_thread():
            thread.join(timeout=30)


# --- the mechanism --------------------------------------------------------------------------
def _raises_deeper() -> None:
    raise TypeError("from the wrapped callable")


def _wrapper(inner: Callable[[], Any]) -> Any:
    try:
        return inner()
    except BaseException as error:
        drop_own_frame(error)
        raise


def _names(action: Callable[[], Any]) -> list[str]:
    try:
        action()
    except BaseException as error:
        return [f.name for f in traceback.extract_tb(error.__traceback__)]
    raise AssertionError("no error raised")


@PY310_KEEPS_OUR_FRAME
def test_a_wrapper_that_drops_its_frame_leaves_the_traceback_it_would_have_without_it():
    no_frame_of_ours(_names(lambda: _wrapper(_raises_deeper)), ours="_wrapper")
    assert _names(lambda: _wrapper(_raises_deeper)) == ["_names", "<lambda>", "_raises_deeper"]
    assert _names(lambda: _wrapper(lambda: torch.zeros(2).view(3))) == ["_names", "<lambda>", "<lambda>"]


def test_a_traceback_that_does_not_start_in_the_callers_frame_is_left_alone():
    error = ValueError("raised elsewhere")
    try:
        _wrapper(_raises_deeper)
    except TypeError as passed:
        error = passed
    before = error.__traceback__

    def elsewhere() -> None:
        drop_own_frame(error)  # this frame is not in the traceback: nothing to drop

    elsewhere()
    assert error.__traceback__ is before


# --- the DataLoader bookmark ------------------------------------------------------------------
BAD = {0: 5, 2: 1}  # the failing sample: a middle batch without workers, the first with them (see _Broken)


class _Broken(Dataset):
    """Sample ``bad`` raises. With workers it sits in the first batch: which line of torch's
    ``_next_data`` re-raises a later batch's error depends on the order the workers answer in."""

    def __init__(self, bad: int) -> None:
        self.bad = bad

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> Any:
        if i == self.bad:
            raise KeyError(f"sample {i} is missing")
        return torch.tensor([float(i)])


LOADERS = {
    "collate": lambda workers: DataLoader([1, "a", None], batch_size=3, num_workers=workers),
    "dataset": lambda workers: DataLoader(_Broken(BAD[workers]), batch_size=2, num_workers=workers),
}


def _epoch(loader: DataLoader) -> None:
    for _ in loader:
        pass


@pytest.fixture
def bookmark():
    mark = Bookmark()
    mark.patch(torch.utils.data.dataloader)
    assert mark.installed
    yield mark
    mark.unpatch()


@PY310_KEEPS_OUR_FRAME
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_dataset_and_collate_errors_have_the_same_traceback_with_the_bookmark(kind, workers, request):
    def one_epoch() -> None:
        _epoch(LOADERS[kind](workers))

    plain = _trace(one_epoch)
    request.getfixturevalue("bookmark")
    patched = _trace(one_epoch)
    no_frame_of_ours(patched)
    assert patched == plain


@PY310_KEEPS_OUR_FRAME
def test_a_samplers_own_error_with_workers_has_no_frame_of_ours(bookmark):
    class BadSampler(torch.utils.data.Sampler):
        def __len__(self) -> int:
            return 4

        def __iter__(self) -> Any:
            yield 0
            raise RuntimeError("sampler broke")

    trace = _trace(lambda: _epoch(DataLoader(list(range(4)), sampler=BadSampler(), num_workers=2)))
    no_frame_of_ours(trace)
    assert "RuntimeError: sampler broke" in trace


def test_hide_own_frames_removes_the_entry_a_bare_raise_put_back_as_python_3_10_does(bookmark, monkeypatch):
    """What the runner and ``auto`` do before printing: on 3.10 a wrapper's bare ``raise`` restores its entry (here
    ``drop_own_frame`` is turned off to get that traceback on any Python), and hiding our frames gives the plain
    traceback back, chained errors included; a user's own ``__tracebackhide__`` frame is not ours to hide."""

    def one_epoch() -> None:
        _epoch(LOADERS["dataset"](0))

    def chained() -> None:
        try:
            one_epoch()
        except KeyError as e:
            __tracebackhide__ = True  # the user's: stays
            raise RuntimeError("epoch failed") from e

    bookmark.unpatch()
    plain, plain_chained = _trace(one_epoch), _trace(chained)
    bookmark.patch(torch.utils.data.dataloader)
    monkeypatch.setattr("cudaassert_ipy.data.bookmark.drop_own_frame", lambda error: None)
    for action, expected in ((one_epoch, plain), (chained, plain_chained)):
        assert OURS in _trace(action)
        assert _trace(action, then=hide_own_frames) == expected
    assert "in chained" in plain_chained


def test_the_bookmark_still_records_the_batch_whose_dataset_raised(bookmark):
    _trace(lambda: _epoch(LOADERS["dataset"](0)))
    records = bookmark.records()
    assert records[0].note is not None and "KeyError" in records[0].note


@PY310_KEEPS_OUR_FRAME
def test_a_module_that_fails_on_import_has_the_same_traceback_with_the_import_hook(tmp_path, monkeypatch):
    (tmp_path / "fails_on_import.py").write_text("x = 1\nraise ImportError('cannot build this module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def load() -> None:
        __import__("fails_on_import")

    plain = _trace(load)
    sys.modules.pop("fails_on_import", None)
    called: list[Any] = []
    hook = AfterImport("fails_on_import", called.append)
    hook.install()
    try:
        hooked = _trace(load)
    finally:
        hook.uninstall()
        sys.modules.pop("fails_on_import", None)
    no_frame_of_ours(hooked)
    assert called == [] and hooked == plain


# --- the validators ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.zeros(2).view(3),
        lambda: torch.zeros(2, 3) @ torch.zeros(2, 3),
        lambda: F.cross_entropy(torch.zeros(4, 3), torch.zeros(5, dtype=torch.long)),
    ],
    ids=["view", "matmul", "cross_entropy_shapes"],
)
@PY310_KEEPS_OUR_FRAME
def test_torchs_own_errors_under_the_validators_have_no_frame_of_ours(call):
    with cudaassert_ipy.validators():
        trace = _trace(call)
    no_frame_of_ours(trace)
    assert "Error" in trace


def test_a_validator_stop_still_comes_from_the_validator():
    with cudaassert_ipy.validators():
        try:
            F.cross_entropy(torch.zeros(4, 3), torch.tensor([0, 1, 2, 3]))
        except IndexError as error:
            assert type(error).__module__.startswith(OURS)
        else:
            raise AssertionError("the validator did not stop label 3 with 3 classes")


@PY310_KEEPS_OUR_FRAME
def test_an_optimizer_error_under_the_validators_has_no_frame_of_ours():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)
    with cudaassert_ipy.validators():
        trace = _trace(lambda: optimizer.zero_grad(not_an_argument=True))
    no_frame_of_ours(trace)
    assert "TypeError" in trace


# --- in a real kernel, and under the runner ------------------------------------------------------
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LOADER_CELLS = [
    "import torch\nfrom torch.utils.data import DataLoader\n"
    f"next(iter(DataLoader([1, 'a', None], batch_size=3, num_workers={workers})))"
    for workers in (0, 2)
] + [
    "import torch\nfrom torch.utils.data import DataLoader, Dataset\n"
    "class Broken(Dataset):\n    def __len__(self): return 8\n"
    f"    def __getitem__(self, i):\n        if i == {BAD[workers]}: raise KeyError(f'sample {{i}} is missing')\n"
    "        return torch.tensor([float(i)])\n"
    f"for batch in DataLoader(Broken(), batch_size=2, num_workers={workers}):\n    pass"
    for workers in (0, 2)
]


def _shown(reply: dict, messages: list[dict]) -> list[str]:
    lines = [ANSI.sub("", line) for line in reply.get("traceback", [])]
    lines += [m["content"]["text"] for m in messages if m["type"] == "stream"]
    lines = [re.sub(r"ipykernel_\d+", "ipykernel_N", line) for line in lines]  # a worker's text names the kernel
    return [re.sub(r" at 0x[0-9a-f]+", " at 0xADDR", line) for line in lines]


@PY310_KEEPS_OUR_FRAME
@pytest.mark.kernel
def test_a_notebook_shows_dataloader_errors_byte_identical_with_the_extension_loaded():
    shown = []
    for setup in ("pass", "%load_ext cudaassert"):
        with running_kernel() as kc:
            execute(kc, setup, silent=True)
            shown.append([_shown(*execute(kc, cell)) for cell in LOADER_CELLS])
    for cell, plain, loaded in zip(LOADER_CELLS, *shown):
        assert "".join(plain).count("Error") >= 1, cell
        no_frame_of_ours(loaded, plain)
        assert loaded == plain, cell


@PY310_KEEPS_OUR_FRAME
@pytest.mark.kernel
def test_a_debug_cell_and_validators_in_a_notebook_show_torchs_error_with_no_frame_of_ours():
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert", silent=True)
        debug = _shown(*execute(kc, "%%cuda_debug --nan\nimport torch\ntorch.zeros(2).view(3)"))
        checked = _shown(*execute(kc, "%cudaassert validators on\nimport torch\ntorch.zeros(2).view(3)"))
    for shown in (debug, checked):
        text = "\n".join(shown)
        no_frame_of_ours(text)
        assert "RuntimeError: shape '[3]' is invalid for input of size 2" in text


SCRIPT = """
import torch
from torch.utils.data import DataLoader, Dataset

class Broken(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        if i == {bad}:
            raise KeyError(f"sample {{i}} is missing")
        return torch.tensor([float(i)])

if __name__ == "__main__":
    for batch in DataLoader({data}, batch_size={batch}, num_workers={workers}):
        pass
"""


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("data,batch", [("[1, 'a', None]", 3), ("Broken()", 2)], ids=["collate", "dataset"])
def test_the_runner_prints_dataloader_errors_exactly_as_python_does(tmp_path: Path, data, batch, workers):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(SCRIPT.format(data=data, batch=batch, workers=workers, bad=BAD[workers])))
    runs = [
        subprocess.run(
            [sys.executable, *prefix, path.name],
            cwd=tmp_path,
            env=kernel_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        for prefix in ([], ["-m", "cudaassert_ipy"])
    ]
    plain, ours = runs
    assert plain.returncode == ours.returncode == 1
    assert "Error" in plain.stderr
    assert ours.stderr == plain.stderr
