"""Honest when unsure, reading what the text holds (#25): a graph or a categorical lookup in the user's own line, a
package's loss or op line when the user's lines call nothing a rule knows, and the categorical-embedding reading of a
lookup that names no table. The generic sentence stays for text that holds nothing. Every text is written for the
test, in the form Python and PyTorch print it."""

from __future__ import annotations

import pytest
from helpers.pastes import ASSERT
from helpers.pastes import first as _first
from helpers.pastes import trace as _trace

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import GENERIC_ID
from cudaassert_ipy.diagnose.causes.texts import UNSURE

SITE = "/srv/env/lib/python3.11/site-packages/"
MODULE = (SITE + "torch/nn/modules/module.py", 1736, "_call_impl", "return forward_call(*args, **kwargs)")


@pytest.mark.parametrize(
    "code",
    [
        "logits = gnn(batch.x, batch.edge_index, batch.batch)",  # PyG's Data fields
        "out = self.conv3(x, edge_index, edge_weight=w)",
        "g.update_all(fn.copy_u('h', 'm'), fn.sum('m', 'h'))",  # DGL's message passing
        "feats = blk.srcdata['feat']",
        "msg = torch.index_select(x, 0, edge_index[0])",  # the op is a lookup, its index a graph's edges
        "agg = scatter_add(msg, edge_index[1], dim=0, dim_size=n)",
    ],
)
def test_a_graph_line_ranks_node_ids_first(code: str) -> None:
    d = _first(
        _trace(
            ("/home/ana/gnn/run.py", 58, "<module>", "step(model, loader)"),
            MODULE,
            ("/home/ana/gnn/net.py", 19, "forward", code),
        )
    )
    assert d.cause_id == "graph_node_index_out_of_range" and d.headline.endswith(
        "likely node id out of range in a graph"
    )
    assert d.basis == f"a code line: net.py:19 (`{code}`), ranked, not decided"
    assert d.candidates[1] == hints.CODE_CHECKS["graph_nodes"] and "labels.max()" in d.candidates[2]


@pytest.mark.parametrize(
    "code",
    [
        "vecs = [table(X_cat[:, k]) for k, table in enumerate(self.emb_layers)]",
        "u = self.user_embedding(user_ids)",
        "pred = net(x_numeric, cat_features)",
        "z = self.field_emb(fields + self.offsets)",
    ],
)
def test_a_lookup_of_categorical_codes_ranks_the_embeddings_cardinality_first(code: str) -> None:
    d = _first(
        _trace(
            ("/opt/rec/train.py", 120, "fit", code), error="RuntimeError: CUDA error: device-side assert triggered\n"
        )
    )
    assert d.cause_id == "index_select_out_of_range" and "likely" in d.headline
    assert d.candidates[1] == hints.CODE_CHECKS["category_codes"] and "cardinality" in d.candidates[1]


def test_a_packages_loss_named_by_its_function_ranks_class_labels() -> None:
    d = _first(
        _trace(
            ("/home/li/seg/main.py", 12, "<module>", "runner.train()"),
            (SITE + "segkit/losses/combo.py", 88, "dice_focal_loss", "w = self.alpha * p_t ** self.gamma"),
        )
    )
    assert d.cause_id == "nll_loss_target_out_of_range"
    assert d.basis.startswith("a code line: combo.py:88") and d.candidates[1] == hints.CODE_CHECKS["labels"]


def test_a_packages_op_line_ranks_when_the_users_lines_call_nothing_a_rule_knows() -> None:
    d = _first(
        _trace(
            ("/work/exp.py", 7, "<module>", "main(cfg)"),
            (SITE + "tinyrec/model.py", 240, "score", "chosen = torch.gather(scores, 1, cand)"),
            MODULE,
        )
    )
    assert d.cause_id == "scatter_gather_index_out_of_range_v1" and d.basis.startswith("a code line: model.py:240")


def test_the_users_line_wins_over_a_packages_line() -> None:
    d = _first(
        _trace(
            ("/work/exp.py", 30, "<module>", "loss = crit(out, tgt)"),
            (SITE + "tinyrec/model.py", 240, "score", "chosen = torch.gather(scores, 1, cand)"),
        )
    )
    assert d.cause_id == "nll_loss_target_out_of_range" and d.basis.startswith("a code line: exp.py:30")


@pytest.mark.parametrize(
    "frame",
    [
        (SITE + "somekit/trainer.py", 402, "training_step_end", "loss.backward()"),  # only used a result
        (SITE + "torch/_tensor.py", 626, "backward", "torch.autograd.backward(self, gradient)"),  # torch's own
        (SITE + "transformers/trainer.py", 3650, "training_step", "loss = self.compute_loss(model, inputs)"),
    ],
)
def test_package_lines_that_say_nothing_of_the_users_model_rank_nothing(frame: tuple[str, int, str, str]) -> None:
    d = _first(_trace(("/work/exp.py", 3, "<module>", "run()"), frame))
    assert d.cause_id == GENERIC_ID and d.candidates[0].startswith("Nothing in the text decides")


def test_a_lookup_that_names_no_table_ranks_categorical_codes_and_graph_nodes_after_tokens_and_positions() -> None:
    for error in ("IndexError: index out of range in self\n", "RuntimeError: index out of range in self\n"):
        d = _first(error)
        assert d.candidates[1:] == UNSURE["lookup"]
        assert "cat_dims" in d.candidates[3] and "unseen" in d.candidates[3]
        assert "edge_index" in d.candidates[4] and "cached=True" in d.candidates[4]
    kernel = _first(
        "/src/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectSmallIndex: block: [3,0,0], thread: [9,0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed.\n" + ASSERT
    )
    assert kernel.candidates[1:] == UNSURE["lookup"]


def test_a_bare_assert_keeps_the_generic_answer_and_names_categorical_codes_among_embedding_ids() -> None:
    d = _first(ASSERT)
    assert d.cause_id == GENERIC_ID and d.candidates[1:] == UNSURE["any"]
    assert any("categorical column" in c for c in d.candidates)


@pytest.mark.parametrize(
    "printed, cause, check",
    [
        ("  num_classes: 6\n", "nll_loss_target_out_of_range", "labels"),
        ("    (head): Linear(in_features=256, out_features=3, bias=True)\n", "nll_loss_target_out_of_range", "labels"),
        ("cat_dims=[12, 4, 31], cat_emb_dim=3\n", "index_select_out_of_range", "category_codes"),
        ("Graph(num_nodes=2708, num_edges=10556,\n", "graph_node_index_out_of_range", "graph_nodes"),
        ("  (embed): Embedding(8000, 256, padding_idx=0)\n", "index_select_out_of_range", "embedding_ids"),
    ],
)
def test_a_size_printed_with_the_error_ranks_what_it_bounds(printed: str, cause: str, check: str) -> None:
    text = "Starting training\n" + printed + "epoch 0 step 10 loss 2.31\n" + ASSERT
    d = _first(text)
    assert d.cause_id == cause and "likely" in d.headline
    assert d.basis == f"a line of the text: `{printed.strip()}`, ranked, not decided"
    assert d.candidates[1] == hints.CODE_CHECKS[check]


def test_a_trainers_num_nodes_is_machines_not_a_graph() -> None:
    """Lightning's ``Trainer(num_nodes=2)`` counts machines: printed beside an assert, it names no graph."""
    text = 'Trainer(accelerator="gpu", devices=4, num_nodes=2, precision="16-mixed")\n' + ASSERT
    d = _first(text)
    assert d.cause_id != "graph_node_index_out_of_range" and not any("edge_index" in c for c in d.candidates[1:2])


def test_a_line_the_user_wrote_wins_over_a_printed_size() -> None:
    text = "num_classes = 10\n" + _trace(("/work/exp.py", 30, "<module>", "e = self.emb(x_cat)"))
    d = _first(text)
    assert d.cause_id == "index_select_out_of_range" and d.basis.startswith("a code line: exp.py:30")


def test_a_framework_that_ranks_its_own_causes_stands_over_a_printed_size() -> None:
    text = "num_labels: 3\n" + _trace(
        (SITE + "transformers/trainer.py", 3650, "training_step", "loss = self.compute_loss(model, inputs)")
    )
    d = _first(text)
    assert d.cause_id == GENERIC_ID and d.candidates[1:] == UNSURE["transformers"]


def test_numbers_that_bound_nothing_rank_nothing() -> None:
    d = _first("batch_size: 64\nlr: 0.001\nnum_workers = 4\n" + ASSERT)
    assert d.cause_id == GENERIC_ID and d.basis.startswith("nothing that decides")


def test_a_loss_line_that_runs_a_graph_model_ranks_the_loss() -> None:
    d = _first(_trace(("/home/ana/gnn/run.py", 77, "<module>", "loss = loss_fn(gnn(x, edge_index)[idx], y[idx])")))
    assert d.cause_id == "nll_loss_target_out_of_range"


@pytest.mark.parametrize(
    "code",
    [
        "for step, users in enumerate(tqdm(users)):",  # a loop over data, not a lookup
        "x = torch.cat([x_num, x_cat], dim=1)",
        "order = sorted(items, key=len)",
    ],
)
def test_lines_that_only_name_categorical_data_rank_no_lookup(code: str) -> None:
    d = _first(_trace(("/opt/rec/train.py", 12, "fit", code)))
    assert d.cause_id == GENERIC_ID


def test_a_printed_model_is_read_at_its_head() -> None:
    model = (
        "Net(\n  (body): Linear(in_features=64, out_features=512, bias=True)\n"
        "  (head): Linear(in_features=512, out_features=5, bias=True)\n)\n"
    )
    d = _first(model + ASSERT)
    assert d.cause_id == "nll_loss_target_out_of_range" and "out_features=5" in d.basis
