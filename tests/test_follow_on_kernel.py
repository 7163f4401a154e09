"""In a real kernel: a library error raised in the cell whose assertion lines it only surfaced is explained by them."""

from __future__ import annotations

from gpu_double import FOLLOW_ON_WORDINGS
from helpers.kernels import execute, running_kernel

from cudaassert_ipy.diagnose.detection import FOLLOW_ON_NOTE

# cuBLAS's wording after an assert (gpu_double); fairseq's threads spliced mid-token (facebookresearch/fairseq#3507).
CUBLAS = FOLLOW_ON_WORDINGS["cublas sgemm"][1]
SPLICED = (
    ",0,0/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu], thread: [60,0:115,0], thread: [16: operator()"
    ",0,0: "
    'block: [12] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds",0,0` failed.\\n'
)


def _report(kc, code: str) -> str:
    reply, msgs = execute(kc, code)
    assert reply["status"] == "error"
    return [m for m in msgs if m["type"] == "display_data"][-1]["content"]["data"]["text/plain"]


def test_a_cublas_error_after_an_assertion_line_gets_the_assertions_cause_and_says_it_is_a_follow_on():
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        plain = _report(
            kc,
            "import os\nfrom gpu_double import assertion_lines\n"
            "os.write(2, assertion_lines('nll_loss_target_out_of_range', threads=4))\n"
            f"raise RuntimeError({CUBLAS!r})",
        )
    assert "GPU context dead · class label out of range" in plain
    assert FOLLOW_ON_NOTE.format(error="RuntimeError: " + CUBLAS) in plain


def test_spliced_worker_lines_in_a_cell_are_read_for_their_whole_condition():
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        plain = _report(
            kc,
            f"import os\nos.write(2, b'{SPLICED}' * 2)\nraise RuntimeError('CUDA error: device-side assert triggered')",
        )
    assert "GPU context dead · gather/scatter index out of bounds" in plain
    assert (
        '(location lost in interleaved output): `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` '
        "failed 2 times"
    ) in plain


# cuBLAS's format (aten/src/ATen/cuda/Exceptions.h), seen after asserts; on its own it says nothing about a dead
# context, so classify() alone passes it by. With an assertion line in the same cell it is the assert's follow-on
# and must get the report.
NOT_INITIALIZED = "CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"


def test_a_library_error_that_is_not_ours_alone_is_explained_when_an_assertion_line_came_with_it():
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        _, msgs = execute(kc, f"raise RuntimeError({NOT_INITIALIZED!r})")
        assert not [m for m in msgs if m["type"] == "display_data"], "alone, it is left exactly as it was"
        plain = _report(
            kc,
            "import os\nfrom gpu_double import assertion_lines\n"
            "os.write(2, assertion_lines('nll_loss_target_out_of_range', threads=4))\n"
            f"raise RuntimeError({NOT_INITIALIZED!r})",
        )
    assert "GPU context dead · class label out of range" in plain
    assert FOLLOW_ON_NOTE.format(error="RuntimeError: " + NOT_INITIALIZED) in plain
