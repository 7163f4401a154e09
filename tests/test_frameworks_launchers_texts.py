"""Launcher, engine and server texts read through their prefixes: the live path and saved logs.

The texts are verbatim from the projects' source and public reports (vLLM PR #52816's EngineCore log, TGI
#3301's router and launcher lines, DeepSpeed #3232's launcher lines, torchrun's ChildFailedError table,
sglang #271's watchdog abort); the CUDA parts are the GPU double's exact texts. TGI's relay reaches a
notebook through whatever client raises it: a local exception class carries the router's exact text.
ZeRO-3 is read from a real torch module whose parameter is freed the way DeepSpeed frees it
(``param.data = torch.empty(0)``, ``param.ds_shape`` keeps the shape); DeepSpeed itself is not installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from gpu_double import DEVICE_ASSERT_WORDINGS, assertion_lines, make_exception
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure
from torch.distributed.elastic.multiprocessing.errors.error_handler import ErrorHandler

from cudaassert_ipy.capture.child_lines import (
    SAMPLES_LINE,
    child_error,
    child_samples,
    error_process,
    first_failure,
    plain_lines,
    readable,
)
from cudaassert_ipy.data.post_mortem import CHILD_SAMPLES, launched
from cudaassert_ipy.data.samples import SampleCheck
from cudaassert_ipy.diagnose.detection import Kind
from cudaassert_ipy.diagnose.pipeline import diagnose_failure, read_failure
from cudaassert_ipy.frameworks.engines import ENGINE_DEAD
from cudaassert_ipy.logs.explain import CLEAR_CACHE, explain_text
from cudaassert_ipy.logs.render import render
from cudaassert_ipy.view.report import to_text

NLL = assertion_lines("nll_loss_target_out_of_range", threads=2).decode()
ASSERT_MESSAGE = DEVICE_ASSERT_WORDINGS["2.9+"][1]

# vllm-project/vllm PR #52816 (the EngineCore's logger prefix; the CUDA runtime's kernel lines carry none)
VLLM_LOG = (
    NLL
    + "".join(
        f"(EngineCore pid=339) ERROR 08-19 10:11:55 [core.py:1348] {line}\n"
        for line in ("    self.copy_event.synchronize()", f"torch.AcceleratorError: {ASSERT_MESSAGE}")
    )
    + (
        "(APIServer pid=1) ERROR 08-19 10:11:55 [async_llm.py:744] AsyncLLM output_handler failed.\n"
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
        "root cause.\n"
    )
)
# A tensor-parallel vLLM's worker rank 1: the worker's prefix and multiproc_executor.py's "WorkerProc hit an exception."
# as public vLLM bug reports show them; then the engine core reports the dead worker.
VLLM_TP_LOG = (
    NLL
    + "".join(
        f"(VllmWorker rank=1 pid=1386049) ERROR 07-23 10:22:47 [multiproc_executor.py:546] {line}\n"
        for line in (
            "WorkerProc hit an exception.",
            "Traceback (most recent call last):",
            f"torch.AcceleratorError: {ASSERT_MESSAGE}",
        )
    )
    + (
        "ERROR 07-23 10:22:47 [core.py:586] EngineCore encountered a fatal error.\n"
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
        "root cause.\n"
    )
)
# huggingface/text-generation-inference#3301
TGI_LOG = (
    "2024-09-12T10:00:00.123456Z ERROR text_generation_launcher: Method Decode encountered an error.\n"
    "    mask[i, allowed_tokens] = 0\n"
    "RuntimeError: CUDA error: device-side assert triggered\n"
    "2024-09-12T10:00:00.2Z ERROR batch{batch_size=1}:decode:decode{size=1}: text_generation_router_v3::client: "
    "backends/v3/src/client/mod.rs:54: Server error: Unexpected <class 'RuntimeError'>: CUDA error: device-side "
    "assert triggered\n"
    "2024-09-12T10:00:00.3Z ERROR text_generation_launcher: Method ClearCache encountered an error.\n"
)
# deepspeedai/DeepSpeed#3232 (the launcher's lines), after rank 1's torchrun-style traceback
DEEPSPEED_LOG = NLL + (
    f"[rank1]: torch.AcceleratorError: {ASSERT_MESSAGE.splitlines()[0]}\n"
    "[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13265\n"
    "[2023-04-14 13:11:27,880] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266\n"
    "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', "
    "'--local_rank=1'] exits with return code = 1\n"
)
# sgl-project/sglang#271: the rank's NCCL watchdog aborts before Python can raise
WATCHDOG = (
    "[rank1]:terminate called after throwing an instance of 'c10::DistBackendError'\n"
    "[rank1]:  what():  [PG 1 Rank 1] Process group watchdog thread terminated with exception: CUDA error: "
    "device-side assert triggered\n"
)


# lzhxmu/CPPO#6, verbatim (host elided there too)
ELASTIC_TABLE = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n\
============================================================
src/open_r1/grpo_gsm.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-05-21_15:43:03
  host      : …
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 14750)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 14750
============================================================
"""


class EngineDeadError(Exception):
    """vLLM's class of that name (``vllm.v1.engine.exceptions``), raised ``from None`` as ``core_client.py`` does."""


class GenerationError(Exception):
    """What a text-generation client raises with the server's error text (huggingface_hub's class of that name)."""


def test_prefixes_are_stripped_before_matching() -> None:
    assert plain_lines("\x1b[31m[rank1]:\x1b[0m RuntimeError: CUDA error: x") == ["RuntimeError: CUDA error: x"]
    assert plain_lines("(EngineCore pid=339) ERROR 08-19 10:11:55 [core.py:1348] Traceback") == ["Traceback"]
    assert plain_lines("(VllmWorker rank=1 pid=219) ERROR 07-23 10:22:47 [multiproc_executor.py:546] Traceback") == [
        "Traceback"
    ]
    assert plain_lines("(VllmWorker TP1 pid=22110) ERROR 11-14 22:48:02 [multiproc_executor.py:596] x") == ["x"]
    assert plain_lines("(Worker_PP0_TP1 pid=88242) ERROR 08-14 11:24:36 [multiproc_executor.py:1232] x") == ["x"]
    assert plain_lines("E1126 20:45:48.278000 6892 torch/distributed/elastic/multiprocessing/api.py:836] x") == ["x"]
    assert plain_lines('{"message":"a\\nRuntimeError: b"}') == ['{"message":"a', 'RuntimeError: b"}']
    assert plain_lines("2024-09-12T10:00:00.3Z ERROR text_generation_launcher: Method ClearCache") == [
        "Method ClearCache"
    ]


def test_a_windows_path_is_not_a_json_escaped_newline() -> None:
    line = r"C:\actions-runner\_work\pytorch\aten\src\ATen\native\cuda\Loss.cu:250: x"
    assert plain_lines(line) == [line] and readable(line) == line


def test_the_childs_error_and_the_first_failing_process_are_read_from_text() -> None:
    assert child_error(VLLM_LOG) == ("torch.AcceleratorError", ASSERT_MESSAGE.strip())
    assert child_error(WATCHDOG) == (
        "c10::DistBackendError",
        "[PG 1 Rank 1] Process group watchdog thread "
        "terminated with exception: CUDA error: device-side assert triggered",
    )
    assert child_error("RuntimeError: Expected all tensors to be on the same device") is None
    assert first_failure(DEEPSPEED_LOG) == "local_rank 1"
    assert first_failure(ELASTIC_TABLE) == "rank 0 (first observed failure)"
    assert child_error(ELASTIC_TABLE) is None, "a SIGKILL carries no error: the rank's own output must say it"
    assert first_failure("-- Process 3 terminated with the following error:\nTraceback") == "process 3"
    assert first_failure("no launcher here") is None


def test_a_vllm_worker_that_died_is_named_by_its_rank() -> None:
    try:
        raise EngineDeadError(ENGINE_DEAD) from None
    except EngineDeadError as error:
        detection, sites = read_failure(error, VLLM_TP_LOG)
    assert detection is not None and detection.launch is not None and sites
    _, diagnosis = diagnose_failure(detection, sites)
    process = "vLLM's worker rank 1 (VllmWorker rank=1 pid=1386049)"
    assert diagnosis.headline.startswith(f"GPU context dead in {process} · ")
    assert diagnosis.status.startswith(f"The GPU context that died was in {process}, which is gone;")
    assert error_process(VLLM_LOG) is None, "the engine core's own line names no worker"


# What gloo raised in the healthy rank of a real 2-process notebook_launcher run (torch 2.14.1) when its peer went away
GLOO_LOST = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:19368: "
    "Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the "
    "application. Check the logs of the remote worker before reporting an error. GLHF! 🏖️"
)


def _recorded(error: BaseException, path: Path, local_rank: int) -> ProcessFailure:
    """A rank's failure as torchelastic records it: its ErrorHandler writes the error file, the agent reads it."""
    os.environ["TORCHELASTIC_ERROR_FILE"] = str(path)
    try:
        try:
            raise error
        except BaseException as raised:
            ErrorHandler().record_exception(raised)
    finally:
        del os.environ["TORCHELASTIC_ERROR_FILE"]
    return ProcessFailure(local_rank=local_rank, pid=1000 + local_rank, exitcode=1, error_file=str(path))


def test_a_rank_that_lost_its_peer_is_not_the_root_cause(tmp_path: Path) -> None:
    lost = _recorded(RuntimeError(GLOO_LOST), tmp_path / "0.json", 0)
    dying = _recorded(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), tmp_path / "1.json", 1)
    error = ChildFailedError("train", {0: lost, 1: dying})
    assert error.get_first_failure()[0] == 0, "torchelastic's root cause is the rank that exited first"
    detection, sites = read_failure(error, NLL)
    assert detection is not None and sites
    _, diagnosis = diagnose_failure(detection, sites)
    assert diagnosis.headline.startswith("GPU context dead in rank 1 (local_rank 1) · class label out of range")
    assert diagnosis.notes[0] == (
        "What reached this process is torch.distributed.elastic's `ChildFailedError` (torchrun, accelerate's "
        "`notebook_launcher` or `launch`): its root cause, rank 0 (first observed failure, local_rank 0), failed with "
        'a connection error ("Connection reset by peer"): it lost its connection to rank 1 (local_rank 1), which '
        "was dying of a CUDA error, so that connection error is a consequence. This report is built from the CUDA "
        "error and kernel assertion lines of rank 1 (local_rank 1) (carried by the wrapper); the traceback above is "
        "the launcher's, in this process."
    )

    # the dying rank was stopped before it recorded its error: its kernel lines alone name the cause
    detection, sites = read_failure(ChildFailedError("train", {0: lost}), NLL)
    assert detection is not None and sites
    _, diagnosis = diagnose_failure(detection, sites)
    assert diagnosis.headline.startswith("GPU context dead in a rank other than rank 0 · class label out of range")
    assert read_failure(ChildFailedError("train", {0: lost}), "") == (None, []), "no CUDA failure: not ours"


def test_a_tgi_relay_is_the_shards_error_and_names_the_shard() -> None:
    try:
        raise GenerationError(
            "Server error: Unexpected <class 'RuntimeError'>: CUDA error: device-side assert triggered"
        )
    except GenerationError as error:
        detection, sites = read_failure(error, "")
    assert detection is not None and detection.kind is Kind.DEVICE_ASSERT and not sites
    assert detection.first_line == "RuntimeError: CUDA error: device-side assert triggered"
    _, diagnosis = diagnose_failure(detection, sites)
    assert not diagnosis.context_dead
    assert diagnosis.status.startswith("The GPU context that died was in the text-generation-inference model shard")
    assert diagnosis.status.endswith("then restart the server.")


def test_logs_explain_vllm_tgi_and_deepspeed_through_their_prefixes() -> None:
    vllm = explain_text(VLLM_LOG)
    assert [g.label for g in vllm.groups] == ["EngineCore pid=339"]
    assert vllm.groups[0].diagnoses[0].cause_id == "nll_loss_target_out_of_range"
    tp = explain_text(VLLM_TP_LOG)
    assert "rank 1" in [g.label for g in tp.groups], "the worker's tag is its rank"
    rank1 = next(g for g in tp.groups if g.label == "rank 1")
    assert rank1.diagnoses[0].cause_id == "nll_loss_target_out_of_range"
    assert "=== rank 1 ===" in render(tp)

    tgi = explain_text(TGI_LOG)
    assert tgi.errors == 1, "the router's relay is the shard's error, counted once"
    assert CLEAR_CACHE in tgi.groups[0].diagnoses[0].notes

    # a JSON log line (the shape of TGI's --json-output, tracing's JSON) and a coloured rank tag
    shipped = explain_text(
        '{"timestamp":"2024-09-12T10:00:00Z","level":"ERROR","fields":{"message":"Method Decode '
        "encountered an error.\\n" + NLL.replace("\n", "\\n") + "RuntimeError: CUDA error: "
        'device-side assert triggered\\n"},"target":"text_generation_launcher"}\n'
    )
    assert shipped.groups[0].diagnoses[0].cause_id == "nll_loss_target_out_of_range"
    assert shipped.groups[0].diagnoses[0].exception_line == "RuntimeError: CUDA error: device-side assert triggered"
    coloured = explain_text(NLL + "\x1b[31m[rank1]:\x1b[0m RuntimeError: CUDA error: device-side assert triggered\n")
    assert [g.label for g in coloured.groups] == ["rank 1"]
    assert coloured.groups[0].diagnoses[0].exception_line == "RuntimeError: CUDA error: device-side assert triggered"

    deepspeed = explain_text(DEEPSPEED_LOG)
    (rank1,) = deepspeed.groups
    notes = rank1.diagnoses[0].notes
    assert rank1.label == "rank 1" and rank1.diagnoses[0].cause_id == "nll_loss_target_out_of_range"
    assert (
        "The launcher's own lines name local_rank 1 as the first process that failed; it stopped the other "
        'processes after that (DeepSpeed\'s launcher: "Killing subprocess" 2x), so what they printed later is '
        "a consequence."
    ) in notes


def test_zero3_freed_parameters_keep_their_true_shape_in_the_evidence() -> None:
    head = torch.nn.Linear(16, 3)
    for param in head.parameters():  # what deepspeed/runtime/zero/partition_parameters.py does to each parameter
        param.ds_shape = param.shape
        param.data = torch.empty(0)
    assert tuple(head.weight.shape) == (0,)
    try:
        raise RuntimeError(ASSERT_MESSAGE)
    except RuntimeError as error:
        detection, sites = read_failure(error, NLL)
    assert detection is not None
    evidence, diagnosis = diagnose_failure(detection, sites, NLL, user_ns={"head": head, "weight": head.weight})
    assert "out_features=3" in to_text(diagnosis)  # from the module's attribute, not from the freed weight
    assert {t.name: t.shape for t in evidence.tensors}["weight"] == (3, 16)


# what a fork of the kernel prints from its own DataLoader bookmark as it exits (data/child_samples.py), here through
# torchrun's --tee prefix; the other rank's lines come later and are not the first failure's
CLASS_LINE = (
    "batch 1 of epoch 0 from `train_loader`: `birds[137]` has class label 195 (position 24 of `labels`; "
    "valid: 0..194 or ignore_index=-100); 1 bad sample in that batch, none in the 1 batch before it."
)
TARGET_LINE = "batch 1 of epoch 0 from `train_loader`: `birds[3]` has target 2.5 (position 0 of `y`; valid: [0, 1])."
CHILD_SAMPLES_TEXT = (
    "".join(
        f"[rank1]: {SAMPLES_LINE.format(pid=4242, kind=kind, line=line)}\n"
        for kind, line in (("class label", CLASS_LINE), ("target", TARGET_LINE))
    )
    + SAMPLES_LINE.format(pid=4243, kind="class label", line="the other rank's line")
    + "\n"
)


def test_a_childs_bad_samples_lines_are_read_through_its_prefix_from_the_first_child_only() -> None:
    assert child_samples(CHILD_SAMPLES_TEXT) == (("class label", CLASS_LINE), ("target", TARGET_LINE))
    assert child_samples("Bad samples:\n  `ds[3]` has class label 9") == (), "only the tagged lines of a child"


def test_the_report_shows_the_childs_lines_of_the_kind_its_cause_is_about(tmp_path: Path) -> None:
    dying = _recorded(make_exception(*DEVICE_ASSERT_WORDINGS["2.9+"]), tmp_path / "1.json", 1)
    detection, sites = read_failure(ChildFailedError("train", {1: dying}), NLL + CHILD_SAMPLES_TEXT)
    assert detection is not None and detection.launch is not None and sites
    _, diagnosis = diagnose_failure(detection, sites)
    assert diagnosis.cause_id == "nll_loss_target_out_of_range"
    check = launched(detection.launch, diagnosis.cause_id)
    assert check is not None and check.lines == (
        CLASS_LINE,
        CHILD_SAMPLES.format(process="rank 1 (first observed failure, local_rank 1)"),
    )
    target = launched(detection.launch, "bce_target_out_of_range")
    assert target is not None and target.lines[0] == TARGET_LINE
    assert launched(detection.launch, "multinomial_zero_sum_async") is None, "a cause not about data values: no section"
    silent, _ = read_failure(ChildFailedError("train", {1: dying}), NLL)
    assert silent is not None and silent.launch is not None
    assert launched(silent.launch, diagnosis.cause_id) == SampleCheck(), "a child that checked nothing: no section"
