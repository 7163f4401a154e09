"""Indexing and scatter: the vectorized scatter-add check, sparse index_select, and Intel XPU's spellings."""

from __future__ import annotations

import torch
from helpers.causes import explain_one, post_mortem
from log_samples import CENSUS

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import match_assert
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import diagnose
from cudaassert_ipy.diagnose.evidence import collect

LINE = {e["id"]: e["line"] for e in CENSUS}
XPU = (
    "/build/torch-xpu-ops/src/ATen/native/xpu/sycl/{file}:{line}: operator(): block: [0,0,0], thread: [0,0,0] "
    "Assertion `{cond}` failed."
)


def _id(condition: str, file: str = "", function: str | None = None) -> str | None:
    cause = match_assert(condition, file, function)
    return cause.id if cause is not None else None


def test_the_vectorized_scatter_add_check_names_its_cause() -> None:
    d = explain_one(LINE["vectorized_scatter_add_index_out_of_range"])
    assert d.cause_id == "vectorized_scatter_add_index_out_of_range"
    assert d.title == "scatter_add_/index_add_ index out of bounds"
    assert "edge_index must be smaller than the number of nodes" in d.fix


def test_a_graphs_edge_index_past_its_node_rows_is_named_with_the_fix() -> None:
    d = post_mortem(
        LINE["vectorized_scatter_add_index_out_of_range"],
        {"edge_index": torch.tensor([[0, 1, 2708], [1, 2, 0]]), "x": torch.zeros(2708, 16)},
        "out = torch.zeros_like(x).index_add_(0, edge_index[1], x[edge_index[0]])",
    )
    assert d.specific is not None and d.specific.startswith(
        "`edge_index` holds values from 0 to 2708, but `x` has 2708 rows."
    )
    assert d.likely_fix == hints.scatter_index("edge_index", 0, 2708, "x", 2708)
    assert ("edge_index", "min 0, max 2708, shape (2, 3)") in d.facts


def test_negative_scatter_indices_are_named_without_a_row_count() -> None:
    d = post_mortem(LINE["scatter_gather_index_out_of_range_v2"], {"index": torch.tensor([0, -1, 3])})
    assert d.specific is not None and d.specific.startswith("`index` holds values from -1 to 3. Likely fix:")
    assert d.likely_fix == hints.SCATTER_NEGATIVE.format(name="index", low=-1)


def test_index_select_on_a_sparse_tensor_names_its_cause() -> None:
    d = explain_one(LINE["sparse_index_select_out_of_range"])
    assert d.cause_id == "sparse_index_select_out_of_range"
    assert d.title == "index out of range in index_select on a sparse tensor"
    assert "sparse.size(dim)" in d.fix


def test_intel_xpu_spellings_with_a_trailing_underscore_name_the_cuda_causes() -> None:
    cases = {
        'idx_dim >= 0 && idx_dim < index_size_ && "scatter gather kernel index out of bounds"': (
            "scatter_gather_index_out_of_range_v2"
        ),
        "t >= 0 && t < n_classes_": "nll_loss_target_out_of_range",
        'index >= -sizes_[i] && index < sizes_[i] && "index out of bounds"': "advanced_indexing_out_of_range_v1",
        'idx >= -size_ && idx < size_ && "index_select(): index out of bounds"': "sparse_index_select_out_of_range",
        "dstIndex < dstAddDimSize_": "index_add_out_of_range",
        'idx < numel_ && idx >= -numel_ && "take_put_kernel_template() index out of bounds"': "take_put_out_of_range",
        "input_[0] != 0": "assert_async_false",
        'lambda >= 0 && "invalid Poisson rate, expected rate to be non-negative"': "poisson_negative_rate",
    }
    for cond, cause_id in cases.items():
        (site,) = scan(XPU.format(file="Kernels.cpp", line=12, cond=cond))
        cause = match_assert(site.condition, site.file, site.function)
        assert cause is not None and cause.id == cause_id, cond
    (site,) = scan(XPU.format(file="EmbeddingBag.h", line=104, cond="weight_index < num_row_"))
    assert _id(site.condition, site.file, site.function) == "embedding_bag_invalid_index_v2"


class TinyConfig:
    """A model config as transformers keeps it (only the class name's ``Config`` and the sizes are read)."""

    vocab_size = 100
    max_position_embeddings = 16
    type_vocab_size = 2


def test_an_index_error_whose_size_is_a_named_quantity_says_what_the_index_is() -> None:
    embeddings = torch.zeros(2, 4)
    try:
        embeddings[torch.tensor([0, 2])]  # a token type id 2 with two segment types
    except IndexError as error:
        detection = classify(error)
    assert detection is not None
    d = diagnose(collect(detection, user_ns={"config": TinyConfig()}))
    assert d.specific == (
        "The index 2 is a token type id: `config.type_vocab_size` is 2, so token type ids must be "
        "0..1. Likely fix: " + hints.sized_index("token type id", 2, 2) + "."
    )
    assert diagnose(collect(detection, user_ns={})).specific is None, "no quantity of that size: no guess"
