"""Embeddings: nn.Embedding with max_norm (the renorm check fires first) and EmbeddingBag's new text."""

from __future__ import annotations

import torch
from helpers.causes import explain_one, post_mortem
from log_samples import CENSUS

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import get_cause, match_assert

LINE = {e["id"]: e["line"] for e in CENSUS}


def test_an_embedding_with_max_norm_reports_the_renorm_check() -> None:
    d = explain_one(LINE["embedding_renorm_index_out_of_range"])
    assert d.cause_id == "embedding_renorm_index_out_of_range"
    assert d.title == "token id out of range in an embedding with max_norm"
    assert "resize_token_embeddings" in d.fix
    assert d.assert_sites[0].startswith("Embedding.cu:208 renorm_kernel:")


def test_the_renorm_rule_names_the_table_the_ids_and_max_norm() -> None:
    d = post_mortem(
        LINE["embedding_renorm_index_out_of_range"],
        {"emb": torch.nn.Embedding(100, 8, max_norm=1.0), "input_ids": torch.tensor([[5, 100, 7]])},
    )
    assert d.specific is not None and d.specific.startswith(
        "Token ids reach 100, but `emb` has num_embeddings=100 (valid 0..99)."
    )
    assert "The embedding has max_norm set: it renormalises the rows an id selects before the lookup" in d.specific
    assert d.likely_fix is not None and d.likely_fix.startswith("the embedding has num_embeddings=100 (ids 0..99)")


def test_the_wrapping_pre_pass_of_the_renorm_is_the_same_cause_family() -> None:
    d = explain_one(LINE["embedding_renorm_wrap_index_out_of_range"])
    assert d.cause_id == "embedding_renorm_wrap_index_out_of_range"
    assert d.title == "token id out of range in an embedding with max_norm"


def test_embedding_bags_new_text_names_its_cause_and_negative_ids_get_their_clause() -> None:
    d = explain_one(LINE["embedding_bag_invalid_index_v2"])
    assert (d.cause_id, d.title) == ("embedding_bag_invalid_index_v2", "index out of range in an EmbeddingBag")
    assert "hash or take the modulo" in d.fix
    d = post_mortem(
        LINE["embedding_bag_invalid_index_v2"], {"bag": torch.nn.EmbeddingBag(50, 4), "ids": torch.tensor([3, -1, 49])}
    )
    assert d.likely_fix is not None and hints.EMBEDDING_NEGATIVE in d.likely_fix


def test_the_old_embedding_bag_text_stays_marked_with_the_releases_that_print_it() -> None:
    cause = match_assert("input[emb] < numRows", "aten/src/ATen/native/cuda/EmbeddingBag.cu")
    assert cause is not None and cause.id == "embedding_bag_index_out_of_range"
    assert "not in 2.14.1" in cause.releases
    assert get_cause("embedding_bag_invalid_index_v2").releases.startswith("2.14.1 (EmbeddingBag.cu:88, :148)")
