"""Rule for checks whose printed text names no op: read the op from the code that launched the kernel.

A GPU tensor check without a message prints ``Assertion `` failed.``; Windows builds print
``input[0] != 0`` for every such check; sparse compressed-tensor validation prints the literal words
``cond && message``. The kernel line cannot say which op it was, but the failing cell usually can:
``index_put_(..., accumulate=True)``, ``ctc_loss``, ``torch._assert_async``, ``torch.multinomial``,
``torch.sparse_csr_tensor``. The first op the cell calls names the check and its fix.
"""

from __future__ import annotations

from typing import NamedTuple

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, call_in_source

__all__ = ["OPS", "op_from_source"]


class _Op(NamedTuple):
    names: tuple[str, ...]  # callables as a cell writes them
    op: str  # the op the report names
    what: str  # what its check is
    fix: str  # from hints


_INDEX_PUT = _Op(
    ("index_put_", "index_put", "use_deterministic_algorithms"),
    "index_put_",
    "its index range check runs on the GPU and prints no message",
    hints.ASYNC_INDEX_PUT,
)
_CTC = _Op(
    ("ctc_loss", "CTCLoss"),
    "ctc_loss",
    "on the cuDNN path its length checks run on the GPU and print no message",
    hints.ASYNC_CTC,
)
_OWN = _Op(("_assert_async",), "torch._assert_async", "a check you wrote", hints.ASYNC_OWN)
_MULTINOMIAL = _Op(
    ("multinomial", "Categorical", "generate"),
    "multinomial",
    "its probability check prints `input[0] != 0` on Windows builds",
    hints.PROBS_NONFINITE,
)

#: The ops to look for, by cause, in the order they are tried.
OPS: dict[str, tuple[_Op, ...]] = {
    "assert_async_empty_message": (_OWN, _CTC, _INDEX_PUT),
    "assert_async_false": (_OWN, _MULTINOMIAL, _CTC, _INDEX_PUT),
}
_SPARSE = (
    "sparse_csr_tensor",
    "sparse_csc_tensor",
    "sparse_bsr_tensor",
    "sparse_bsc_tensor",
    "sparse_compressed_tensor",
    "to_sparse_csr",
    "to_sparse_csc",
    "to_sparse_bsr",
    "to_sparse_bsc",
    "check_sparse_tensor_invariants",
)
CALLS = "The cell calls {op}: {what}."


def op_from_source(case: Case) -> Finding | None:
    if case.cause_id == "sparse_compressed_invariant_violated":
        name = call_in_source(case.ev, _SPARSE)
        if name is None:
            return None
        f = Finding(op=name)
        f.sentences.append(
            CALLS.format(op=name, what="the kernel printed only `cond && message`, not the rule that failed")
        )
        f.fix = hints.SPARSE_ON_CPU.format(call=name)
        return f
    for candidate in OPS.get(case.cause_id, ()):
        name = call_in_source(case.ev, candidate.names)
        if name is not None:
            f = Finding(op=candidate.op)
            f.sentences.append(CALLS.format(op=name, what=candidate.what))
            f.fix = candidate.fix
            return f
    return None
