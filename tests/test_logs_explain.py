"""Explaining a saved log: every site and CUDA error in it, grouped by rank, through paste damage."""

from __future__ import annotations

import pytest
from log_samples import (
    ASSERT_24,
    CUDNN_NOT_INITIALIZED,
    HIP,
    LOSS,
    S1,
    S5,
    S10,
    S12,
    TRITON,
    pasted_markdown,
    ranks_log,
)

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.diagnose.detection import FOLLOW_ON_NOTE
from cudaassert_ipy.logs.explain import LOG_STATUS, NO_EXCEPTION, SHARED_SITES, UNTAGGED_MOVED, explain_text
from cudaassert_ipy.logs.ranks import rank_label
from cudaassert_ipy.logs.render import HEADER, NOTHING_FOUND, REPAIRED, SPLICED, UNREADABLE, render


def _only(text: str):
    ex = explain_text(text)
    (group,) = ex.groups
    (d,) = group.diagnoses
    return ex, group, d


def test_torchrun_untagged_assertion_lines_go_under_the_only_rank_that_asserted():
    ex, group, d = _only(S5)
    assert group.label == "rank 0"
    assert d.cause_id == "nll_loss_target_out_of_range" and d.context_dead and d.status == LOG_STATUS
    assert d.assert_sites == (
        "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 1 thread of 1 block",
    )
    assert d.exception_line == "RuntimeError: CUDA error: device-side assert triggered"
    assert UNTAGGED_MOVED.format(label="rank 0") in d.notes
    text = render(ex)
    assert text.startswith(
        HEADER.format(
            prefix=PREFIX,
            source="log",
            sites="1 assertion site",
            errors="1 CUDA error",
            ranks="; grouped by rank (rank 0)",
        )
    )
    cut = "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], t[...]"
    assert text.endswith(UNREADABLE.format(count=1, first=cut))


def test_spliced_lines_recover_the_whole_catalogued_condition_inside_them():
    ex, _, d = _only(S10)
    assert d.cause_id == "scatter_gather_index_out_of_range_v1"
    assert d.assert_sites == (
        '(location lost in interleaved output): `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` '
        "failed 2 times",
    )
    assert ex.spliced == () and "Could not be read" not in render(ex)


def test_a_spliced_fragment_with_no_known_condition_is_said_to_be_unreadable():
    line = "] Assertion `mask[i] ,0,0< 3` failed.\n" + ASSERT_24
    ex = explain_text(line)
    assert [o.fragment for o in ex.spliced] == ["mask[i] ,0,0< 3"]
    assert render(ex).endswith(SPLICED.format(count=1, first="] Assertion `mask[i] ,0,0< 3` failed."))


def test_ranks_are_grouped_apart_with_their_own_sites_and_errors():
    ex = explain_text(ranks_log())
    assert [g.label for g in ex.groups] == ["rank 1", "rank 3"]
    rank1, rank3 = (g.diagnoses[0] for g in ex.groups)
    assert rank1.cause_id == "nll_loss_target_out_of_range"
    assert rank1.assert_sites[0].endswith("failed in 2 threads of 2 blocks")
    watchdog = "log line: CUDA error: an illegal memory access was encountered"
    assert FOLLOW_ON_NOTE.format(error=watchdog) in rank1.notes
    assert rank3.cause_id == "scatter_gather_index_out_of_range_v1"
    assert rank3.exception_line == "AcceleratorError: CUDA error: device-side assert triggered"
    assert "=== rank 1 ===" in render(ex) and "=== rank 3 ===" in render(ex)


def test_a_cudnn_error_after_an_assertion_line_is_explained_by_the_assertion_as_its_follow_on():
    _, _, d = _only(LOSS.format(b=0, t=1) + "\n" + CUDNN_NOT_INITIALIZED + "\n")
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert d.exception_line == "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"
    assert FOLLOW_ON_NOTE.format(error=d.exception_line) in d.notes


def test_a_cudnn_error_alone_is_not_explained():
    ex = explain_text(CUDNN_NOT_INITIALIZED + "\n")
    assert not ex.found
    assert render(ex) == NOTHING_FOUND.format(prefix=PREFIX, source="log")


def test_pasted_markdown_damage_is_read_through_and_listed():
    ex, _, d = _only(pasted_markdown())
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert d.exception_line == "RuntimeError: CUDA error: device-side assert triggered"
    assert d.assert_sites == (
        "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 4 threads of 1 block",
        "Loss.cu (line number lost) nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in 1 "
        "thread of 1 block",
    )
    assert render(ex).endswith(
        REPAIRED.format(
            repairs=(
                "link markup around paths (1), quote marks (2), HTML entities (4), doubled backticks (1), "
                "conditions without backticks (1), records without a line number (1)"
            )
        )
    )


def test_a_thcunn_line_and_the_dtor_report_glued_to_the_traceback():
    _, _, d = _only(S1)
    assert d.cause_id == "thcunn_bce_input_out_of_range"
    assert d.exception_line == (
        "log line: CUDA error after cudaEventDestroy in future dtor: device-side assert triggered"
    )


def test_a_cpp_terminate_without_assertion_lines_names_the_c10_error():
    _, _, d = _only(S12)
    assert d.kind == "device_assert" and d.assert_sites == ()
    assert d.exception_line.startswith("c10::Error: CUDA error: device-side assert triggered (insert_events at ")


def test_a_triton_assert_without_debug_info_gets_the_inductor_cause():
    _, _, d = _only(TRITON)
    assert d.cause_id == "inductor_triton_index_out_of_bounds"
    assert d.assert_sites == (
        "Triton kernel (no source location): `index out of bounds: 0 <= tmp42 < 1024` failed in 2 threads of 1 block",
    )
    assert d.specific is not None and d.specific.startswith("The compiled kernel checked an index against 1024:")


def test_a_rocm_line_is_explained_like_its_cuda_twin():
    _, _, d = _only(HIP + ASSERT_24)
    assert d.cause_id.startswith("nll_loss") and d.assert_sites[0].endswith("failed 1 time")


def test_assertion_lines_with_no_exception_in_the_log_say_so():
    _, _, d = _only(LOSS.format(b=0, t=0))
    assert d.exception_line == NO_EXCEPTION and d.cause_id == "nll_loss_target_out_of_range"


def test_untagged_sites_are_shared_when_several_ranks_reported_an_assert():
    text = LOSS.format(b=0, t=0) + "\n[rank0]: " + ASSERT_24.splitlines()[0] + "\n[rank2]: " + ASSERT_24.splitlines()[0]
    ex = explain_text(text)
    assert [g.label for g in ex.groups] == [None, "rank 0", "rank 2"]
    assert all(SHARED_SITES in g.diagnoses[0].notes for g in ex.groups[1:])
    assert "=== no rank tag ===" in render(ex)


@pytest.mark.parametrize(
    ("line", "label"),
    [
        ("[rank3]:x", "rank 3"),
        ("[rank0]:[CUDA_KERNEL_ASSERT] x", "rank 0"),
        ("[default2]:x", "rank 2"),
        ("[1,5]<stderr>:x", "rank 5"),
        ("(RayTrainWorker pid=611035) x", "RayTrainWorker pid=611035"),
        ("(RayTrainWorker pid=611035, ip=10.0.0.1) x", "RayTrainWorker pid=611035"),
        ("(RayWorkerWrapper pid=263, ip=10.0.16.95) ERROR 01-30 worker_base.py:145] x", "RayWorkerWrapper pid=263"),
        ("(VllmWorker rank=1 pid=219) ERROR 08-31 14:42:32 [multiproc_executor.py:546] x", "rank 1"),
        ("\x1b[1;36m(VllmWorker rank=0 pid=218)\x1b[0;0m INFO x", "rank 0"),
        ("(VllmWorker TP1 pid=22110) ERROR 11-14 22:48:02 [multiproc_executor.py:596] x", "TP rank 1"),
        ("(Worker_TP1 pid=530) INFO 10-06 18:54:29 [gpu_model_runner.py:2641] x", "TP rank 1"),
        ("(Worker_PP1_TP0 pid=88241) ERROR 08-14 11:24:36 [multiproc_executor.py:1232] x", "PP rank 1, TP rank 0"),
        ("(EngineCore_DP1 pid=77) ERROR x", "DP rank 1"),
        ("(EngineCore pid=339) ERROR x", "EngineCore pid=339"),
        ("(Worker pid=899) (Worker_TP1 pid=899) ERROR 03-31 10:11:24 [multiproc_executor.py:880] x", "TP rank 1"),
        ("[E509 16:18:30.801728316 ProcessGroupNCCL.cpp:1895] [PG ID 2 PG GUID 3 Rank 1] x", "rank 1"),
        ("3: x", "task 3"),
        ("2024-01-01 12:00:00 INFO x", None),
        ("../aten/src/ATen/native/cuda/Loss.cu:250: f: block: [0,0,0], thread: [0,0,0] Assertion `x` failed.", None),
    ],
)
def test_launcher_tags_name_the_rank(line, label):
    assert rank_label(line) == label


def test_undecodable_bytes_and_an_empty_log_find_nothing():
    assert not explain_text("").found
    assert not explain_text("\ufffd\x00\x01 garbage " * 1000).found


def test_libtorchs_error_wrapped_by_a_program_outside_python_is_read_as_its_message() -> None:
    rust = (
        "thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: Torch(\"index out of range in "
        "self\\nException raised from operator() at ../aten/src/ATen/native/TensorAdvancedIndexing.cpp:1190 (most "
        "recent call first):\\nframe #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x6b (0x7f in "
        "libc10.so)\\n\")', src/main.rs:88:41\n"
    )
    d = explain_text(rust).groups[0].diagnoses[0]
    assert d.cause_id == "index_select_out_of_range" and d.exception_line.startswith("IndexError: index out of range")
    cpp = (
        "terminate called after throwing an instance of 'c10::IndexError'\n"
        "  what():  index 70 is out of bounds for dimension 0 with size 64\n"
        "Exception raised from operator() at ../aten/src/ATen/native/TensorAdvancedIndexing.cpp:830\n"
    )
    assert explain_text(cpp).groups[0].diagnoses[0].cause_id == "advanced_indexing_out_of_range_v1"
    # a program's own panic that wraps no libtorch message says nothing
    assert not explain_text("thread 'main' panicked at 'Torch(\"file not found\")', src/main.rs:3:9\n").found
