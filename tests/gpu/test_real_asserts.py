"""Every catalogued device-side assert that the installed torch can reach from Python, triggered for real.

Each case runs in its own process (a device-side assert kills that process's CUDA context), forked
from a warm fork server (``helpers/assert_child.py``) and given a time limit: an in-process IPython
shell with the extension loaded (fd tap on), one setup cell that builds CPU tensors, and one cell that
moves them to the GPU and calls the op, then synchronises. The child writes what the extension
concluded as JSON; the test checks the detection (device_assert, context dead), that a folded site's
condition is one the diagnosed cause knows, and the cause itself: the expected id, or another id of
the same group where a build routes the op through another kernel (index_select through gather,
index_add_ through scatter_add on CUDA >= 12.8, ...). Each test records the diagnosed cause and
whether it is an expected one (the JSON summary of ``scripts/gpu-tests.sh --device``).

On the dry run (``CUDAASSERT_GPU_TEST_DEVICE=cpu``) the same cells run on the CPU, where PyTorch raises
the CPU twin of the assert: the diagnosis must name the same cause (or one of its group) from the
twin, with the context alive. Where the CPU raises no twin of the assert (``cpu_error``: another
check, or none catalogued), the case checks that the CPU raised exactly that.

Not reachable with a current torch, so not here: the THC / THCUNN kernels (PyTorch <= ~1.9), the
older multinomial kernels, texts the catalogue marks as not printed by 2.14.1, the internal invariants
(they never fail on valid input), and the sites that need hardware or setups beyond one GPU (MoE grouped
GEMM on sm_90+, NCCL and NVSHMEM, third-party kernels); the TMA scatter-add kernel is accepted through its
group when a build takes that path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.assert_child import run_case
from helpers.gpu_device import DEVICE, DEVICE_VAR, ON_GPU, gpu_only

from cudaassert_ipy.diagnose.causes import all_causes, get_cause

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
CASE_TIMEOUT = 120  # seconds for one case's process; a case that hangs fails alone

_CONDITION = re.compile(r"`(?P<cond>.*)` failed in (?P<threads>\d+) threads?")


@dataclass(frozen=True)
class Case:
    name: str
    setup: str  # CPU tensors only: the evidence can read their values after the crash
    trigger: str  # moves them to `device` and calls the op
    causes: tuple[str, ...]  # acceptable cause ids (the first is the one this torch is expected to print)
    specific: str | None = None  # a phrase the cause's sentence must contain, where the rule has one
    cpu_error: str | None = None  # the start of the CPU's error where it is no twin of this assert

    @property
    def groups(self) -> set[str]:
        return {g for g in (get_cause(c).group for c in self.causes) if g}


IMPORTS = "import torch\nimport torch.nn.functional as F\n"
CLASS = ("nll_loss_target_out_of_range", "nll_loss_target_out_of_range_no_reduce")
EMBEDDING = (
    "index_select_out_of_range",
    "vectorized_gather_index_out_of_range",
    "scatter_gather_index_out_of_range_v2",
)
ADVANCED = (
    "advanced_indexing_out_of_range_v2",
    "advanced_indexing_out_of_range_v1",
    "vectorized_gather_index_out_of_range",
)
SCATTER = (
    "scatter_gather_index_out_of_range_v2",
    "scatter_gather_index_out_of_range_v1",
    "vectorized_gather_index_out_of_range",
    "tma_scatter_add_index_out_of_range",
)
MULTINOMIAL = (
    "multinomial_invalid_probs_async",
    "multinomial_zero_sum_async",
    "multinomial_zero_mass_binary_search",
    "multinomial_sample_once_invalid_probs",
    "assert_async_false",
)


def first(primary: str, accepted: tuple[str, ...]) -> tuple[str, ...]:
    """``accepted`` with ``primary`` moved to the front (the id this torch is expected to print)."""
    return (primary, *(c for c in accepted if c != primary))


SCATTER_FILL = first("scatter_gather_index_out_of_range_v1", SCATTER)
ROWS = first("vectorized_gather_index_out_of_range", ADVANCED)
ZERO_SUM = first("multinomial_zero_sum_async", MULTINOMIAL)

CASES = (
    Case(
        "cross_entropy_1d_input",
        IMPORTS + "logits = torch.randn(3)\nlabel = torch.tensor(3)",
        "F.cross_entropy(logits.to(device), label.to(device))",
        CLASS,
        "class label 3",
    ),
    Case(
        "cross_entropy_2d_input",
        IMPORTS + "logits = torch.randn(4, 3)\nlabels = torch.tensor([0, 1, 3, 2])",
        "F.cross_entropy(logits.to(device), labels.to(device))",
        CLASS,
        "class label 3",
    ),
    Case(
        "cross_entropy_no_reduce",
        IMPORTS + "logits = torch.randn(4, 3)\nlabels = torch.tensor([0, 1, 3, 2])",
        "F.cross_entropy(logits.to(device), labels.to(device), reduction='none')",
        ("nll_loss_target_out_of_range_no_reduce", "nll_loss_target_out_of_range"),
        "class label 3",
    ),
    Case(
        "nll_loss2d_segmentation_void_255",
        IMPORTS + "logits = torch.randn(2, 4, 8, 8)\nmask = torch.zeros(2, 8, 8, dtype=torch.long)\nmask[0, 0] = 255",
        "F.cross_entropy(logits.to(device), mask.to(device))",
        ("nll_loss2d_target_out_of_range", "nll_loss2d_target_out_of_range_no_reduce"),
        "255",
    ),
    Case(
        "nll_loss2d_no_reduce",
        IMPORTS + "logits = torch.randn(2, 4, 8, 8)\nmask = torch.zeros(2, 8, 8, dtype=torch.long)\nmask[1, 3] = 7",
        "F.cross_entropy(logits.to(device), mask.to(device), reduction='none')",
        ("nll_loss2d_target_out_of_range_no_reduce", "nll_loss2d_target_out_of_range"),
        "class label 7",
    ),
    Case(
        "multi_margin_loss",
        IMPORTS + "scores = torch.randn(4, 3)\ny = torch.tensor([0, 1, 5, 2])",
        "F.multi_margin_loss(scores.to(device), y.to(device))",
        ("multi_margin_target_out_of_range",),
    ),
    Case(
        "bce_input_logits",
        IMPORTS + "logits = torch.linspace(-3, 3, 8)\ny = torch.rand(8)",
        "F.binary_cross_entropy(logits.to(device), y.to(device))",
        ("bce_input_out_of_range",),
    ),
    Case(
        "bce_target_0_255",
        IMPORTS + "p = torch.rand(8)\nmask = torch.full((8,), 255.0)",
        "F.binary_cross_entropy(p.to(device), mask.to(device))",
        ("bce_target_out_of_range",),
    ),
    Case(
        "embedding_token_id",
        IMPORTS + "weight = torch.randn(10, 4)\nids = torch.tensor([[1, 12, 3]])",
        "F.embedding(ids.to(device), weight.to(device))",
        EMBEDDING,
        "Token ids reach 12",
    ),
    Case(
        "index_select",
        IMPORTS + "x = torch.randn(10, 4)\nidx = torch.tensor([3, 10])",
        "x.to(device).index_select(0, idx.to(device))",
        EMBEDDING,
    ),
    Case(
        "embedding_bag_index",
        IMPORTS + "weight = torch.randn(10, 3)\nids = torch.tensor([1, 2, 40, 4])\noffsets = torch.tensor([0, 2])",
        "F.embedding_bag(ids.to(device), weight.to(device), offsets.to(device))",
        ("embedding_bag_invalid_index_v2", "embedding_bag_index_out_of_range", *EMBEDDING),
    ),
    Case(
        "embedding_max_norm",
        IMPORTS + "weight = torch.randn(10, 4)\nids = torch.tensor([[1, 12, 3]])",
        "F.embedding(ids.to(device), weight.to(device), max_norm=1.0)",
        ("embedding_renorm_index_out_of_range", "embedding_renorm_wrap_index_out_of_range", *EMBEDDING),
        "Token ids reach 12",
        cpu_error="select(): index 12 out of range for tensor of size [10, 4]",
    ),
    Case(
        "cross_entropy_uint8_labels",
        IMPORTS + "logits = torch.randn(4, 3)\nlabels = torch.tensor([0, 1, 255, 2], dtype=torch.uint8)",
        "F.nll_loss(logits.log_softmax(-1).to(device), labels.to(device))",
        ("nll_loss_target_out_of_range_uint8", *CLASS),
        "class label 255",
    ),
    Case(
        "embedding_bag_offsets_decreasing",
        IMPORTS + "weight = torch.randn(10, 3)\nids = torch.tensor([1, 2, 3, 4])\noffsets = torch.tensor([0, 3, 2])",
        "F.embedding_bag(ids.to(device), weight.to(device), offsets.to(device))",
        ("embedding_bag_offsets_not_increasing",),
        cpu_error="Expected i < index_size to be true",
    ),
    Case(
        "index_add_",
        IMPORTS + "idx = torch.tensor([0, 7])",
        "torch.zeros(5, 3, device=device).index_add_(0, idx.to(device), torch.ones(2, 3, device=device))",
        ("index_add_out_of_range", *SCATTER),
    ),
    Case(
        "index_copy_",
        IMPORTS + "idx = torch.tensor([0, 7])",
        "torch.zeros(5, 3, device=device).index_copy_(0, idx.to(device), torch.ones(2, 3, device=device))",
        ("index_copy_out_of_range",),
    ),
    Case(
        "index_fill_",
        IMPORTS + "idx = torch.tensor([0, 7])",
        "torch.zeros(5, 3, device=device).index_fill_(0, idx.to(device), 1.0)",
        ("index_fill_out_of_range",),
        cpu_error="index 7 is out of bounds for dimension 0 with size 5",
    ),
    Case(
        "advanced_indexing_get",
        IMPORTS + "x = torch.randn(5)\nidx = torch.tensor([0, 9])",
        "x.to(device)[idx.to(device)]",
        ADVANCED,
    ),
    Case(
        "advanced_indexing_set",
        IMPORTS + "x = torch.randn(5)\nidx = torch.tensor([0, 9])",
        "xd = x.to(device)\nxd[idx.to(device)] = 1.0",
        ADVANCED,
    ),
    Case(
        "advanced_indexing_rows",
        IMPORTS + "table = torch.randn(10, 8)\nrows = torch.tensor([2, 10, 4])",
        "table.to(device)[rows.to(device)]",
        ROWS,
    ),
    Case(
        "gather",
        IMPORTS + "x = torch.randn(4, 3)\nidx = torch.tensor([[0], [1], [5], [2]])",
        "x.to(device).gather(1, idx.to(device))",
        SCATTER,
    ),
    Case(
        "scatter_",
        IMPORTS + "idx = torch.tensor([[0], [1], [5], [2]])",
        "torch.zeros(4, 3, device=device).scatter_(1, idx.to(device), torch.ones(4, 1, device=device))",
        SCATTER,
    ),
    Case(
        "scatter_scalar_fill",
        IMPORTS + "idx = torch.tensor([[0], [1], [5], [2]])",
        "torch.zeros(4, 3, device=device).scatter_(1, idx.to(device), 1.0)",
        SCATTER_FILL,
    ),
    Case(
        "one_hot_explicit_num_classes",
        IMPORTS + "labels = torch.tensor([0, 5, 1])",
        # on the CPU the twin's own words name one_hot's class values (a frameless point); on the GPU the kernel's
        # line names the scatter, and that cause stands
        "F.one_hot(labels.to(device), num_classes=3)",
        (*SCATTER_FILL, "one_hot_class_out_of_range"),
    ),
    Case(
        "take",
        IMPORTS + "x = torch.randn(5)\nidx = torch.tensor([0, 10])",
        "x.to(device).take(idx.to(device))",
        ("take_put_out_of_range",),
    ),
    Case(
        "put_",
        IMPORTS + "idx = torch.tensor([0, 10])",
        "torch.zeros(5, device=device).put_(idx.to(device), torch.ones(2, device=device))",
        ("take_put_out_of_range",),
    ),
    Case(
        "masked_scatter_",
        IMPORTS + "mask = torch.tensor([1, 1, 1, 1, 0, 0], dtype=torch.bool)",
        "torch.zeros(6, device=device).masked_scatter_(mask.to(device), torch.ones(2, device=device))",
        ("masked_scatter_source_too_small",),
    ),
    Case(
        "multinomial_nan",
        IMPORTS + "probs = torch.tensor([[0.5, float('nan'), 0.5]])",
        "torch.multinomial(probs.to(device), 1)",
        MULTINOMIAL,
    ),
    Case(
        "multinomial_zero_sum",
        IMPORTS + "probs = torch.zeros(2, 3)\nprobs[0, 1] = 1.0",
        "torch.multinomial(probs.to(device), 1)",
        ZERO_SUM,
    ),
    Case(
        "multinomial_zero_sum_with_replacement",
        IMPORTS + "probs = torch.zeros(2, 3)\nprobs[0, 1] = 1.0",
        "torch.multinomial(probs.to(device), 4, replacement=True)",
        ZERO_SUM,
    ),
    Case(
        "bernoulli",
        IMPORTS + "p = torch.tensor([0.5, 1.5])",
        "torch.bernoulli(p.to(device))",
        ("bernoulli_prob_out_of_range",),
    ),
    Case(
        "repeat_interleave_output_size",
        IMPORTS + "x = torch.tensor([1, 2])\nrepeats = torch.tensor([1, 2])",
        "torch.repeat_interleave(x.to(device), repeats.to(device), output_size=5)",
        ("repeat_interleave_output_size_mismatch",),
    ),
    Case(
        "repeat_interleave_negative",
        IMPORTS + "repeats = torch.tensor([-1, 2])",
        "torch.repeat_interleave(repeats.to(device), output_size=1)",
        (
            "repeat_interleave_invalid_repeats_v2",
            "repeat_interleave_negative_repeats",
            "repeat_interleave_output_size_mismatch",
        ),
    ),
    Case(
        "poisson_negative_rate",
        IMPORTS + "rates = torch.tensor([1.0, -1.0])",
        "torch.poisson(rates.to(device))",
        ("poisson_negative_rate",),
        cpu_error="invalid Poisson rate, expected rate to be non-negative",
    ),
    Case(
        "index_put_accumulate",
        IMPORTS + "idx = torch.tensor([0, 9])",
        "torch.zeros(5, device=device).index_put_((idx.to(device),), torch.ones(2, device=device), accumulate=True)",
        ("assert_async_empty_message", "assert_async_false", *ADVANCED),
    ),
    Case(
        "sparse_csr_invariants",
        IMPORTS + "crow = torch.tensor([1, 1, 2])\ncol = torch.tensor([0, 1])\nval = torch.ones(2)",
        "torch.sparse_csr_tensor(crow.to(device), col.to(device), val.to(device), size=(2, 2), check_invariants=True)",
        ("sparse_compressed_invariant_violated",),
        cpu_error="`crow_indices[..., 0] == 0` is not satisfied.",
    ),
    Case(
        "max_unpool2d",
        IMPORTS + "x = torch.randn(1, 1, 2, 2)\nidx = torch.tensor([[[[0, 1], [2, 99]]]])",
        "F.max_unpool2d(x.to(device), idx.to(device), kernel_size=2, output_size=(4, 4))",
        ("max_unpool2d_index_out_of_range",),
    ),
    Case(
        "max_unpool3d",
        IMPORTS + "x = torch.randn(1, 1, 1, 2, 2)\nidx = torch.tensor([[[[[0, 1], [2, 999]]]]])",
        "F.max_unpool3d(x.to(device), idx.to(device), kernel_size=(1, 2, 2), output_size=(1, 4, 4))",
        ("max_unpool3d_index_out_of_range",),
    ),
    Case(
        "assert_async",
        IMPORTS + "flag = torch.tensor(0)",
        "torch._assert_async(flag.to(device))",
        ("assert_async_empty_message", "assert_async_false"),
    ),
    Case(
        "torch_compile_inductor_index",
        IMPORTS + "table = torch.randn(4, 8)\nids = torch.tensor([1, 7])\n"
        "lookup = torch.compile(lambda t, i: t[i] * 2)",
        "lookup(table.to(device), ids.to(device))",
        ("inductor_triton_index_out_of_bounds", *ADVANCED),
    ),
)


NO_CPU_TWIN = {  # cases the dry run leaves to the GPU
    "torch_compile_inductor_index": "on the CPU, Inductor builds C++ (a minute or more) and its error is no twin",
}


def run_child(case: Case, tmp_path: Path, device: str = DEVICE) -> dict[str, Any]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTEST_CURRENT_TEST", "CUDA_LAUNCH_BLOCKING", "CUDAASSERT_VALIDATORS")
    }
    env[DEVICE_VAR] = device
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return run_case(case.name, case.setup, case.trigger, device, tmp_path, env, CASE_TIMEOUT)


def test_every_case_names_catalogued_causes_and_the_catalogue_reachable_set_is_covered():
    from cudaassert_ipy.diagnose.causes.texts import EXTRA_TEXTS

    kernel = {c.id for c in all_causes()}
    known = kernel | set(EXTRA_TEXTS)  # and the causes named without a kernel line of their own
    named = {cause for case in CASES for cause in case.causes}
    assert named <= known, named - known
    primaries = {case.causes[0] for case in CASES}
    beyond_one_gpu = {c.id for c in all_causes() if c.reach != "user" or "not in 2.14.1" in c.releases}
    unreachable = beyond_one_gpu | {
        "tma_scatter_add_index_out_of_range",
        "multinomial_sample_once_invalid_probs",
        "multinomial_renorm_negative",
        "multinomial_zero_mass_binary_search",
        "assert_async_false",
        "embedding_renorm_wrap_index_out_of_range",
    }  # old kernels, internal invariants, beyond one GPU, and alternatives accepted within a group
    not_yet = {  # reachable on one GPU, no case yet: their fixtures are the census lines (tests/test_causes_*.py)
        "nll_loss_target_out_of_range_no_reduce_uint8",
        "sparse_index_select_out_of_range",
        "vectorized_scatter_add_index_out_of_range",
        "fractional_max_pool2d_backward_bad_index",
        "fractional_max_pool2d_backward_index_row",
        "fractional_max_pool3d_backward_bad_index",
        "fractional_max_pool3d_backward_index_plane",
        "segment_reduce_negative_length",
        "segment_reduce_mean_negative_length",
    }
    assert kernel - primaries - unreachable - not_yet == set()


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=gpu_only(NO_CPU_TWIN[c.name])) if c.name in NO_CPU_TWIN else c for c in CASES],
    ids=[c.name for c in CASES],
)
def test_a_real_device_assert_is_detected_folded_and_explained(case: Case, tmp_path: Path, record_property):
    r = run_child(case, tmp_path)
    where = f"\n--- the case's output:\n{r['log']}"
    assert "harness_error" not in r, r.get("harness_error", "") + where
    d = r.get("diagnosis")
    record_property("expected", list(case.causes))
    record_property("cause_id", d and d["cause_id"])
    assert r["setup_error"] is None, r["setup_error"] + where
    assert r["tap"], f"fd tap not running: {r['tap_note']}" + where
    assert r["error_type"] is not None, f"{case.trigger!r} raised nothing on {DEVICE}" + where
    if not ON_GPU and case.cpu_error:
        record_property("matched", None)  # no twin: the CPU raises another error, checked here instead
        assert r["error_first_line"].startswith(case.cpu_error), r["error_first_line"]
        return
    assert d is not None, "no diagnosis" + where
    cause = get_cause(d["cause_id"])
    accepted = d["cause_id"] in case.causes or (cause.group is not None and cause.group in case.groups)
    record_property("matched", accepted)
    if ON_GPU:
        assert d["kind"] == "device_assert" and d["context_dead"] and r["dead"], d
        assert d["assert_sites"], "no assertion line was captured" + where
        conditions = [m.group("cond") for s in d["assert_sites"] if (m := _CONDITION.search(s))]
        assert conditions, d["assert_sites"]
        assert any(cause.matches_condition(c) for c in conditions), (d["cause_id"], d["assert_sites"])
    else:
        assert d["kind"] == "cpu_twin" and not d["context_dead"] and not r["dead"], d
    assert accepted, f"diagnosed {d['cause_id']} ({d['title']}), expected one of {case.causes}: {d['assert_sites']}"
    if case.specific:
        assert d["specific"] and case.specific in d["specific"], d["specific"]


def test_a_case_that_hangs_is_killed_at_its_limit_and_the_next_case_still_runs(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    with pytest.raises(AssertionError, match=r"the case's process wrote nothing \(killed after 3s\)"):
        run_case("hangs", IMPORTS, "import time\ntime.sleep(600)", DEVICE, tmp_path, env, 3)
    after = run_child(CASES[0], tmp_path)
    assert after["error_first_line"] and after["diagnosis"]["cause_id"] in CASES[0].causes, after
