"""Rule for scatter/gather-style index checks: name the index tensor and the rows it reaches past.

The kernel says only that some index was negative or not smaller than the size of the dimension
(``ind >= 0 && ind < self_dim_size``). The host facts say more when an integer index tensor is
readable on the CPU: its range, and the float tensors whose rows it would address (a graph's node
features ``x`` for an ``edge_index``, the output of a scatter).
Example: "`edge_index` holds values from 0 to 2708, but `x` has 2708 rows. Likely fix: `edge_index`
reaches 2708 but `x` has 2708 rows: every index must be 0..2707 ..."
"""

from __future__ import annotations

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, pick

__all__ = ["scatter_index"]

RANGE = "`{name}` holds values from {low} to {top}"
ROWS = ", but `{rows_of}` has {rows} rows"
_INDEX_WORDS = ("index", "idx", "edge", "batch", "src", "dst", "seg", "perm", "pos", "ids", "scatter")
_ROW_WORDS = ("x", "out", "feat", "h", "emb", "node", "self", "src")
_FLOAT_DTYPES = ("torch.float", "torch.bfloat", "torch.half")


def _rows(case: Case, top: int) -> tuple[str, int] | None:
    """The float tensor (named in the cell first) whose row count the index reaches: the same count first."""
    floats = [t for t in case.ev.tensors if t.shape and t.dtype.startswith(_FLOAT_DTYPES)]
    reached = [t for t in pick(floats, _ROW_WORDS, case.ev.cell_source) if t.shape[0] <= top]
    exact = [t for t in reached if t.shape[0] == top]
    chosen = exact or reached
    return (chosen[0].name, chosen[0].shape[0]) if chosen else None


def scatter_index(case: Case) -> Finding | None:
    for cand in pick(
        [v for v in case.ev.labels if any(w in v.name.lower() for w in _INDEX_WORDS)], _INDEX_WORDS, case.ev.cell_source
    ):
        rows = _rows(case, cand.maximum)
        if cand.minimum >= 0 and rows is None:
            continue
        f = Finding()
        sentence = RANGE.format(name=cand.name, low=cand.minimum, top=cand.maximum)
        if rows is not None:
            sentence += ROWS.format(rows_of=rows[0], rows=rows[1])
        f.sentences.append(sentence + ".")
        f.facts.append((cand.name, f"min {cand.minimum}, max {cand.maximum}, shape {cand.shape}"))
        rows_of, n = rows if rows is not None else (None, None)
        f.fix = hints.scatter_index(cand.name, cand.minimum, cand.maximum, rows_of, n) or None
        return f
    return None
