"""The registry of post-mortem rules, and running them each under its own guard.

One small rule per family (friendly-traceback style): a rule reasons on plain facts and returns
None when the case is not its own. A rule that crashes costs only its own sentences: it becomes a
one-line note, and the rest of the diagnosis (title, fix, assert sites, exception) stands.
"""

from __future__ import annotations

from collections.abc import Sequence

from cudaassert_ipy.base.wording import error_line
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, RuleEntry
from cudaassert_ipy.diagnose.causes.rule_bce import bce
from cudaassert_ipy.diagnose.causes.rule_graph import pooled_readout
from cudaassert_ipy.diagnose.causes.rule_internal import internal_op
from cudaassert_ipy.diagnose.causes.rule_labels import class_labels
from cudaassert_ipy.diagnose.causes.rule_narrow_ids import int16_wrapped
from cudaassert_ipy.diagnose.causes.rule_ops import op_from_source
from cudaassert_ipy.diagnose.causes.rule_printed_labels import printed_labels
from cudaassert_ipy.diagnose.causes.rule_repeat import repeat_sizes
from cudaassert_ipy.diagnose.causes.rule_sampling import sum_overflow
from cudaassert_ipy.diagnose.causes.rule_scatter import scatter_index
from cudaassert_ipy.diagnose.causes.rule_sizes import sized_index
from cudaassert_ipy.diagnose.causes.rule_smoothing import label_smoothing
from cudaassert_ipy.diagnose.causes.rule_tokens import token_ids
from cudaassert_ipy.diagnose.causes.rule_triton import triton_size

__all__ = ["RULES", "RULE_FAILED", "Case", "Finding", "RuleEntry", "find"]

#: A rule that raised, as a note in the report.
RULE_FAILED = "[internal] rule {rule} failed: {error}; the rest of this report stands."

#: Every rule, keyed by the cause ids or catalogue groups it explains; the first finding wins.
RULES: tuple[RuleEntry, ...] = (
    # before class_labels, which always answers: a pasted log's printed num_labels, when there is no head to read
    RuleEntry("printed_labels", frozenset({"class_target_out_of_range"}), printed_labels),
    RuleEntry("class_labels", frozenset({"class_target_out_of_range"}), class_labels),
    RuleEntry("int16_wrapped", frozenset({"embedding_or_index_select_out_of_range"}), int16_wrapped),
    RuleEntry("token_ids", frozenset({"embedding_or_index_select_out_of_range"}), token_ids),
    RuleEntry("bce", frozenset({"bce_range"}), bce),
    RuleEntry(
        "triton_size",
        frozenset(
            {
                "inductor_triton_index_out_of_bounds",
                "inductor_triton_index_upper_only",
                "inductor_triton_index_lower_only",
            }
        ),
        triton_size,
    ),
    RuleEntry("label_smoothing", frozenset({"scatter_gather_out_of_range"}), label_smoothing),
    RuleEntry("scatter_index", frozenset({"scatter_gather_out_of_range"}), scatter_index),
    RuleEntry("repeat_sizes", frozenset({"repeat_interleave_output_size_mismatch"}), repeat_sizes),
    RuleEntry(
        "op_from_source",
        frozenset({"assert_async_empty_message", "assert_async_false", "sparse_compressed_invariant_violated"}),
        op_from_source,
    ),
    RuleEntry("internal_op", frozenset({"internal_invariant"}), internal_op),
    RuleEntry("sized_index", frozenset({"advanced_indexing_out_of_range"}), sized_index),
    RuleEntry("pooled_readout", frozenset({"graph_node_index_out_of_range"}), pooled_readout),
    RuleEntry("sum_overflow", frozenset({"multinomial_invalid_probs"}), sum_overflow),
)


def find(case: Case, rules: Sequence[RuleEntry] = RULES) -> tuple[Finding | None, tuple[str, ...]]:
    """The first finding of the rules that apply to ``case``, and a note for each rule that crashed."""
    notes: list[str] = []
    for entry in rules:
        if not entry.applies(case.cause_id, case.group):
            continue
        try:
            finding = entry.run(case)
        except Exception as error:  # one rule's bug must not cost the report
            notes.append(RULE_FAILED.format(rule=entry.name, error=error_line(error)))
            continue
        if finding is not None:
            return finding, tuple(notes)
    return None, tuple(notes)
