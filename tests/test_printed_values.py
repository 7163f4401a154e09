"""What a paste prints beside (or instead of) its error: an exception's repr inside a logger's line, the values
and counts a user printed. Each reading is held by synthetic pastes in the frameworks' printed forms."""

from __future__ import annotations

import pytest
from helpers.pastes import first as _first
from helpers.pastes import trace as _trace

from cudaassert_ipy.logs.explain import explain_text

PROBS = "probability tensor contains either `inf`, `nan` or element < 0"


@pytest.mark.parametrize(
    "line",
    [
        f"future: <Future finished exception=RayTaskError(RuntimeError)(RuntimeError('{PROBS}'))>",
        f'ERROR:root:generation failed with RuntimeError("{PROBS}")',
        f"2031-02-03 04:05:06 | ERROR | asyncio | Task exception: RuntimeError('{PROBS}') in worker 3",
    ],
)
def test_an_error_printed_only_as_its_repr_in_a_logger_line_is_read(line: str) -> None:
    frames = _trace(("/srv/app/engine/loop.py", 12, "step", "out = await self.sample()"), error="")
    d = _first("Task exception was never retrieved\n" + line + "\n" + frames)
    assert d.cause_id == "multinomial_invalid_probs_async"
    assert "temperature" in d.fix and "NaN loss" in d.fix


def test_a_repr_of_an_error_that_names_no_cause_is_not_read() -> None:
    text = "future: <Future finished exception=RuntimeError('connection reset by peer')>\n"
    assert not explain_text(text).found


def test_the_sampling_fix_names_a_nan_loss_and_a_tiny_temperature() -> None:
    d = _first(
        "/pytorch/aten/src/ATen/native/cuda/MultinomialKernel.cu:243: void at::native::<unnamed>::"
        "sampleMultinomialOnce(long *, long, int, scalar_t *, scalar_t *, int, int) [with scalar_t = float, "
        "accscalar_t = float]: block: [3,0,0], thread: [0,0,0] Assertion `val >= zero` failed.\n"
        "INFO epoch 7 step 2 loss nan\n"
    )
    assert d.cause_id == "multinomial_sample_once_invalid_probs"
    assert "NaN loss" in d.fix and "tiny temperature" in d.fix


@pytest.mark.parametrize("status", ["CUBLAS_STATUS_ALLOC_FAILED", "CUBLAS_STATUS_NOT_INITIALIZED"])
def test_cublas_failing_to_create_its_handle_is_read_as_a_dead_context(status: str) -> None:
    d = _first(
        f"RuntimeError: CUDA error: {status} when calling `cublasCreate(handle)` "
        "(createCublasHandle at /opt/pytorch/aten/src/ATen/cuda/CublasHandlePool.cpp:9)\n"
    )
    assert d.cause_id == "index_select_out_of_range" and "no free memory" in (d.specific or "")
    labels = next(c for c in d.candidates if c.startswith("class labels"))
    assert "-100" in labels and "-1" in labels


def test_cublas_alloc_failed_in_a_gemm_is_not_a_handle_failure() -> None:
    text = "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasSgemm( handle, opa, opb)`\n"
    assert not explain_text(text).found


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ("n_classes: 5\n", "RuntimeError: index 7 is out of bounds for dimension 1 with size 6\n"),
        (
            "Namespace(lr=0.01, num_classes=10, epochs=3)\n",
            "RuntimeError: index 10 is out of bounds for dimension 1 with size 10\n",
        ),
        ("'num_labels': 2,\n", "IndexError: index 2 is out of bounds for dimension 1 with size 2\n"),
    ],
)
def test_an_index_past_dimension_1_beside_a_printed_class_count_is_a_class_label(config: str, error: str) -> None:
    d = _first("training with\n" + config + error)
    assert d.cause_id == "one_hot_class_out_of_range"
    assert "consecutive" in (d.likely_fix or "") and "255" in (d.likely_fix or "")


def test_a_class_count_beside_another_dimension_or_no_count_does_not_decide() -> None:
    assert _first("n_classes: 5\nRuntimeError: index 7 is out of bounds for dimension 0 with size 6\n").cause_id != (
        "one_hot_class_out_of_range"
    )
    assert _first("RuntimeError: index 7 is out of bounds for dimension 1 with size 6\n").cause_id != (
        "one_hot_class_out_of_range"
    )


@pytest.mark.parametrize(
    "printed",
    [
        "edge_index shape: torch.Size([2, 1200])\n",
        "x: (300, 64)  edge index: (2, 1200)\n",
        "batch.edge_indices max = 301\n",
    ],
)
def test_an_index_error_beside_a_printed_edge_index_is_a_node_id(printed: str) -> None:
    d = _first(printed + "IndexError: index 300 is out of bounds for dimension 0 with size 300\n")
    assert d.cause_id == "graph_node_index_out_of_range"
    assert "edge_index" in (d.likely_fix or "") and "number of nodes" in (d.likely_fix or "")


def test_an_index_error_without_an_edge_index_is_not_read_as_a_graph() -> None:
    d = _first("sizes: torch.Size([2, 1200])\nIndexError: index 300 is out of bounds for dimension 0 with size 300\n")
    assert d.cause_id != "graph_node_index_out_of_range"


@pytest.mark.parametrize(
    "printed",
    [
        "tensor([  0, 255])\n",
        "tensor([0, 1, 2, 255], device='cuda:0')\n",
        "array([  0, 255], dtype=uint8)\n",
        "np.unique(mask):\n[  0   1 255]\n",
    ],
)
def test_a_printed_label_set_running_to_255_foretells_a_mask_value_out_of_range(printed: str) -> None:
    alone = _first(printed)
    assert alone.cause_id == "nll_loss2d_target_out_of_range" and "printed value" in alone.notes[0]
    assert "0/255" in (alone.likely_fix or "") and "ignore_index=255" in (alone.likely_fix or "")
    with_error = _first(printed + "RuntimeError: CUDA error: device-side assert triggered\n")
    assert with_error.cause_id == "nll_loss2d_target_out_of_range"


@pytest.mark.parametrize("printed", ["tensor([  0, 1, 2])\n", "tensor([ 12, 255])\n", "[  0 128 254]\n"])
def test_other_printed_value_sets_foretell_nothing(printed: str) -> None:
    assert not explain_text(printed).found


def test_an_unattributed_gather_assert_says_last_that_torch_made_indices_may_be_a_torch_bug() -> None:
    d = _first(
        "/src/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [2,0,0], "
        'thread: [17,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
    )
    assert d.cause_id == "scatter_gather_index_out_of_range_v1"
    assert d.candidates[1].startswith("class labels")  # the common cause stays first
    assert "PyTorch bug" in d.candidates[-1] and "upgrading PyTorch" in d.candidates[-1]


ASSERT_LINE = "RuntimeError: CUDA error: device-side assert triggered\n"


@pytest.mark.parametrize(
    "printed",
    [
        "labels: tensor([ 7, -1,  0, -1], device='cuda:0')\n",
        '{"input_ids": [101, 2023, 102], "labels": [-1, 2023, -1]}\n',
        "target = -1\n",
        "Targets array([ 2, -1,  1])\n",
    ],
)
def test_printed_labels_holding_minus_one_are_a_class_label_out_of_range(printed: str) -> None:
    d = _first("epoch 1\n" + printed + ASSERT_LINE)
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert "-100" in (d.likely_fix or "") and "ignore_index=-1" in (d.likely_fix or "")


@pytest.mark.parametrize(
    "line",
    [
        "    loss = loss_fct(logits.view(-1, self.num_labels), labels.view(-1))\n",
        "labels[labels == -1] = -100\n",
        "labels: tensor([-100, 4, -100])\n",
        "target: [0, 1, 2, -10]\n",
    ],
)
def test_code_that_reshapes_or_remaps_labels_and_other_values_are_not_minus_one_labels(line: str) -> None:
    assert _first(line + ASSERT_LINE).cause_id != "nll_loss_target_out_of_range"
