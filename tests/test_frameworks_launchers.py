"""Launchers and engines for real, on the CPU: the cell gets only a wrapper, the failure is in a child process.

Real launchers start real children in a real kernel with the extension loaded: accelerate's
``notebook_launcher(fn, num_processes=2)`` (torch.distributed.elastic, fork) → ``ChildFailedError``;
``torch.multiprocessing.spawn`` → ``ProcessRaisedException``; ``subprocess.run([...], check=True)`` →
``CalledProcessError``. Each failing child does what a device assert does to a process (``gpu_double``: the
kernel's assertion lines on its fd 2, inherited from the kernel, so the fd tap sees them; then the exact
exception text). vLLM is not installable here: a real child process writes what vLLM's EngineCore logs, in
vLLM's exact format, and the cell raises a local ``EngineDeadError`` with vLLM's exact message ``from None``
(tests/helpers/launched.py). The report must name the cause from the child's lines, the first failing
process, and say that this kernel's GPU context is alive.
Runs in the frameworks environment:
``.venv-fw/bin/python -m pytest -m frameworks tests/test_frameworks_launchers.py``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.kernels import execute, running_kernel, text_of

from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure
from cudaassert_ipy.view.report import to_text

pytestmark = pytest.mark.frameworks

ALIVE = (
    "which is gone; this process's own GPU context was not touched by it, so no restart is needed here: fix "
    "the cause, then "
)
NLL_SITE = "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 2 threads"

LAUNCHER_CELL = """
import os
from accelerate import notebook_launcher
from gpu_double import fail_like_gpu
from helpers.launched import free_port

def train():
    if os.environ["RANK"] == "1":
        fail_like_gpu(threads=2)

notebook_launcher(train, num_processes=2, use_port=str(free_port()))
"""
# the bad label comes from a real Dataset's __getitem__; the rank's own DataLoader bookmark (a fork of the kernel's)
# recorded the batch, and the double fails where the GPU would, at the loss of the batch that holds it
BIRDS_SETUP = """
import os, torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from gpu_double import fail_like_gpu
from helpers.launched import free_port

class Birds(Dataset):
    def __len__(self):
        return 256
    def __getitem__(self, i):
        return torch.randn(8), torch.tensor(195 if i == 137 else i % 195)

birds = Birds()
train_loader = DataLoader(birds, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 195))

def train(*args):
    for images, labels in train_loader:
        logits = model(images)
        if bool((labels >= 195).any()) and os.environ.get("RANK", str(args[0] if args else "")) == "1":
            fail_like_gpu("nll_loss_target_out_of_range", threads=2)  # what the loss's kernel does on a GPU
"""
SAMPLES_CELL = (
    BIRDS_SETUP
    + """
from accelerate import notebook_launcher
notebook_launcher(train, num_processes=2, use_port=str(free_port()))
"""
)
FORK_SPAWN_CELL = (
    BIRDS_SETUP
    + """
import torch.multiprocessing as mp
mp.start_processes(train, nprocs=2, start_method="fork")
"""
)
# torchrun from a cell, its ranks watching themselves (helpers/launched_samples.py imports cudaassert_ipy.auto)
AUTO_TORCHRUN_CELL = """
import subprocess, sys
subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                "-m", "helpers.launched_samples"], check=True)
"""
# mp.spawn's default spawn start: fresh processes, watched by the target's module (helpers/spawned_samples.py)
AUTO_SPAWN_CELL = """
import torch.multiprocessing as mp
from helpers.spawned_samples import train
mp.spawn(train, nprocs=2)
"""
BAD_SAMPLE = re.compile(
    r"Bad samples:\n  batch (\d+) of epoch 0 from `train_loader`: `birds\[137\]` has class label "
    r"195 \(position (\d+) of `labels`; valid: 0\.\.194 or ignore_index=-100\); 1 bad sample in "
    r"that batch"
)
# the healthy rank exits first, with gloo's connection error: torchelastic's root cause is that rank
RACE_CELL = """
from accelerate import notebook_launcher
from helpers.launched import free_port, peer_lost
notebook_launcher(peer_lost, num_processes=2, use_port=str(free_port()))
"""
SPAWN_CELL = """
import torch.multiprocessing as mp
from helpers.launched import spawned
mp.spawn(spawned, nprocs=2)
"""
ABORT_CELL = """
import torch.multiprocessing as mp
from helpers.launched import aborted
mp.spawn(aborted, nprocs=2)
"""
COMMAND_CELL = """
import subprocess, sys
subprocess.run([sys.executable, "-m", "helpers.launched", "fail"], check=True)
"""
# Ultralytics' multi-GPU DDP from a notebook: `python -m torch.distributed.run ...` run with check=True
TORCHRUN_CELL = """
import subprocess, sys
subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                "-m", "helpers.launched", "rank_1_fails"], check=True)
"""
# accelerate launch's multi_gpu_launcher, DeepSpeed through accelerate: torchrun's own entry point in this process,
# a module entrypoint without @record (no error file): the failure table says only "To enable traceback see: ..."
TORCHRUN_INPROCESS_CELL = """
from torch.distributed.run import main as torchrun
torchrun(["--standalone", "--nproc_per_node", "2", "-m", "helpers.launched", "rank_1_fails"])
"""
ENGINE_CELL = """
import subprocess, sys
from helpers.launched import EngineDeadError
engine = subprocess.run([sys.executable, "-m", "helpers.launched", "engine_core"])
try:
    engine.check_returncode()
except subprocess.CalledProcessError:
    raise EngineDeadError() from None
"""

TP_ENGINE_CELL = ENGINE_CELL.replace('"engine_core"', '"tp_worker"')


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    with running_kernel() as kc:
        reply, _ = execute(kc, "%load_ext cudaassert")
        assert reply["status"] == "ok"
        yield kc


def _report(kc: Any, cell: str, ename: str) -> str:
    reply, msgs = execute(kc, cell, timeout=120)
    assert reply["status"] == "error" and reply["ename"] == ename, (reply.get("ename"), text_of(msgs)[-2000:])
    reports = [m for m in msgs if m["type"] == "display_data"]
    assert reports, text_of(msgs)[-3000:]
    plain: str = reports[-1]["content"]["data"]["text/plain"]
    return plain


def _alive(kc: Any) -> None:
    _, msgs = execute(kc, "%cudaassert status")
    assert "GPU context: DEAD" not in text_of(msgs), "a child's failure must not mark this kernel dead"


def test_notebook_launcher_child_failed_error_names_the_childs_cause_and_its_rank(kernel: Any) -> None:
    plain = _report(kernel, LAUNCHER_CELL, "ChildFailedError")
    assert plain.startswith(
        "[cudaassert] The GPU context that died was in rank 1 (first observed failure, "
        "local_rank 1), " + ALIVE + "launch it again."
    )
    assert (
        "GPU context dead in rank 1 (first observed failure, local_rank 1) · class label out of range in cross_entropy"
    ) in plain
    assert NLL_SITE in plain  # the kernel lines the child wrote to its inherited fd 2
    assert "Exception: AcceleratorError: CUDA error: device-side assert triggered" in plain
    assert (
        "What reached this process is torch.distributed.elastic's `ChildFailedError` (torchrun, accelerate's "
        "`notebook_launcher` or `launch`): it only says that rank 1 (first observed failure, local_rank 1) "
        "failed."
    ) in plain
    assert "(carried by the wrapper)" in plain
    _alive(kernel)


def test_notebook_launcher_ranks_name_the_bad_dataset_sample_from_their_own_recorded_batches(kernel: Any) -> None:
    reply, msgs = execute(kernel, SAMPLES_CELL, timeout=120)
    assert reply["status"] == "error" and reply["ename"] == "ChildFailedError", text_of(msgs)[-2000:]
    plain = [m for m in msgs if m["type"] == "display_data"][-1]["content"]["data"]["text/plain"]
    assert (
        "GPU context dead in rank 1 (first observed failure, local_rank 1) · class label out of range in cross_entropy"
    ) in plain
    assert BAD_SAMPLE.search(plain), plain
    assert (
        "Checked by rank 1 (first observed failure, local_rank 1) against its own DataLoader bookmark's last "
        "batches, before it exited."
    ) in plain
    # what the rank printed: its class-label check, tagged for this kernel; no [0, 1] check of the images (no BCE loss)
    printed = [line for line in text_of(msgs).splitlines() if line.startswith("[cudaassert] Bad samples of pid ")]
    assert len(printed) == 1 and "(class label): batch " in printed[0], printed
    _alive(kernel)


def test_mp_start_processes_with_fork_names_the_bad_dataset_sample_too(kernel: Any) -> None:
    plain = _report(kernel, FORK_SPAWN_CELL, "ProcessRaisedException")
    assert "GPU context dead in process 1 of mp.spawn · class label out of range in cross_entropy" in plain
    assert BAD_SAMPLE.search(plain), plain
    assert "Checked by process 1 of mp.spawn against its own DataLoader bookmark's last batches" in plain
    _alive(kernel)


def test_torchrun_ranks_that_import_auto_name_the_bad_dataset_sample_in_the_notebooks_report(kernel: Any) -> None:
    plain = _report(kernel, AUTO_TORCHRUN_CELL, "CalledProcessError")
    assert "GPU context dead in rank 1 (first observed failure) · class label out of range in cross_entropy" in plain
    assert BAD_SAMPLE.search(plain), plain
    assert "Checked by rank 1 (first observed failure) against its own DataLoader bookmark's last batches" in plain
    _alive(kernel)


def test_mp_spawn_processes_that_import_auto_name_the_bad_dataset_sample_in_the_notebooks_report(kernel: Any) -> None:
    plain = _report(kernel, AUTO_SPAWN_CELL, "ProcessRaisedException")
    assert "GPU context dead in process 1 of mp.spawn · class label out of range in cross_entropy" in plain
    assert "`birds[137]` has class label 195" in plain, plain
    assert "Checked by process 1 of mp.spawn against its own DataLoader bookmark's last batches" in plain
    assert plain.count("GPU context dead in") == 1, "the process prints its samples only: the report is this one"
    _alive(kernel)


def test_a_rank_that_lost_its_peer_first_does_not_hide_the_ranks_cuda_failure(kernel: Any) -> None:
    plain = _report(kernel, RACE_CELL, "ChildFailedError")
    assert plain.startswith("[cudaassert] The GPU context that died was in a rank other than rank 0, " + ALIVE)
    assert "GPU context dead in a rank other than rank 0 · class label out of range in cross_entropy" in plain
    assert NLL_SITE in plain
    # gloo words it "Connection closed by peer" or "Read error ...: Connection reset by peer", whichever side saw it
    assert (
        'its root cause, rank 0 (first observed failure, local_rank 0), failed with a connection error ("Connection '
    ) in plain
    assert (
        'by peer"): it lost its connection to a rank other than rank 0, which was dying of a CUDA error, so '
        "that connection error is a consequence."
    ) in plain
    _alive(kernel)


def test_mp_spawn_process_raised_exception_is_read_from_the_childs_traceback_text(kernel: Any) -> None:
    plain = _report(kernel, SPAWN_CELL, "ProcessRaisedException")
    assert "GPU context dead in process 1 of mp.spawn · class label out of range in cross_entropy" in plain
    assert NLL_SITE in plain
    assert "Exception: AcceleratorError: CUDA error: device-side assert triggered" in plain
    _alive(kernel)


def test_a_worker_aborted_by_its_watchdog_is_explained_from_its_kernel_lines_and_what_line(kernel: Any) -> None:
    plain = _report(kernel, ABORT_CELL, "ProcessExitedException")
    assert "GPU context dead in process 1 of mp.spawn · class label out of range in cross_entropy" in plain
    assert NLL_SITE in plain
    assert "Exception: c10::DistBackendError: [PG 1 Rank 1] Process group watchdog thread terminated" in plain
    assert "is a follow-on error: the kernel assertion above killed the GPU context first" in plain
    _alive(kernel)


def test_a_command_run_with_check_is_explained_from_what_its_process_wrote(kernel: Any) -> None:
    plain = _report(kernel, COMMAND_CELL, "CalledProcessError")
    assert "· class label out of range in cross_entropy" in plain
    assert NLL_SITE in plain
    assert "GPU context dead in a child process · class label out of range in cross_entropy" in plain
    assert "-m helpers.launched fail` (exit status 1)" in plain
    assert "(read from its output, which the fd tap captured)" in plain
    _alive(kernel)


def test_ultralytics_style_torchrun_command_names_the_rank_from_torchruns_own_table(kernel: Any) -> None:
    plain = _report(kernel, TORCHRUN_CELL, "CalledProcessError")
    assert "GPU context dead in rank 1 (first observed failure) · class label out of range in cross_entropy" in plain
    assert NLL_SITE in plain
    assert "(exit status 1), run by torchrun" in plain
    _alive(kernel)


def test_torchruns_entry_point_without_an_error_file_is_explained_from_what_the_rank_wrote(kernel: Any) -> None:
    plain = _report(kernel, TORCHRUN_INPROCESS_CELL, "ChildFailedError")
    assert (
        "GPU context dead in rank 1 (first observed failure, local_rank 1) · class label out of range in cross_entropy"
    ) in plain
    assert NLL_SITE in plain
    assert "(read from its output, which the fd tap captured)" in plain
    _alive(kernel)


def test_vllm_engine_dead_error_is_explained_from_the_engine_cores_log_lines(kernel: Any) -> None:
    plain = _report(kernel, ENGINE_CELL, "EngineDeadError")
    assert plain.startswith(
        "[cudaassert] The GPU context that died was in vLLM's EngineCore process, "
        + ALIVE
        + "create the engine (vLLM's `LLM(...)`) again."
    )
    assert "GPU context dead in vLLM's EngineCore process · index out of range in an embedding or index_select" in plain
    assert "Indexing.cu:1292 indexSelectLargeIndex: `srcIndex < srcSelectDimSize` failed in 2 threads" in plain
    assert "Exception: AcceleratorError: CUDA error: device-side assert triggered" in plain
    assert "vLLM's `EngineDeadError` (the engine process died)" in plain
    _alive(kernel)


def test_a_tensor_parallel_vllm_worker_is_named_by_its_rank(kernel: Any) -> None:
    plain = _report(kernel, TP_ENGINE_CELL, "EngineDeadError")
    assert plain.startswith(
        "[cudaassert] The GPU context that died was in vLLM's worker rank 1 (VllmWorker rank=1 pid="
    )
    assert ") · index out of range in an embedding or index_select" in plain
    assert "Indexing.cu:1292 indexSelectLargeIndex: `srcIndex < srcSelectDimSize` failed in 2 threads" in plain
    _alive(kernel)


def test_captured_stderr_of_a_real_command_is_carried_by_the_called_process_error() -> None:
    try:
        subprocess.run([sys.executable, "-m", "helpers.launched", "fail"], check=True, capture_output=True, env=_env())
    except subprocess.CalledProcessError as error:
        detection, sites = read_failure(error, "")
        assert detection is not None and detection.launch is not None and len(sites) == 1
        _, diagnosis = diagnose_failure(detection, sites)
        assert not diagnosis.context_dead and diagnosis.cause_id == "nll_loss_target_out_of_range"
        assert "(carried by the wrapper)" in to_text(diagnosis)
    else:
        raise AssertionError("the child must fail")


def test_a_command_that_failed_for_another_reason_is_not_ours() -> None:
    try:
        subprocess.run(
            [sys.executable, "-c", "import sys; sys.exit('no such dataset')"], check=True, capture_output=True
        )
    except subprocess.CalledProcessError as error:
        assert read_failure(error, error.stderr.decode()) == (None, [])
    else:
        raise AssertionError("the child must fail")


def _env() -> dict[str, str]:
    from helpers import kernel_env

    return kernel_env()
