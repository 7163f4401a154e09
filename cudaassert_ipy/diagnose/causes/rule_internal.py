"""Rule for PyTorch's internal invariants: name the op the cell calls, and the line to report.

These checks never fail on valid input, so the rule invents no data cause. What the host facts add
is which call of the cell launched the kernel (from the catalogue entry's Python APIs: ``topk`` for
TensorTopK.cu), so the CPU rerun and the report can name it, and the site to quote upstream.
"""

from __future__ import annotations

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes import get_cause
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, api_names, call_in_source

__all__ = ["internal_op"]

CALLS = "The cell calls `{op}`, whose CUDA kernel holds this check."


def internal_op(case: Case) -> Finding | None:
    cause = get_cause(case.cause_id)
    op = call_in_source(case.ev, api_names(cause.python_apis))
    if op is None:
        return None
    site = case.ev.sites[0] if case.ev.sites else None
    line = f"{site.where}: `{site.condition}`" if site is not None else None
    who = hints.INTERNAL_WHO["mmcv" if cause.family == "third_party" else "PyTorch"]
    f = Finding()  # the title already names the op family
    f.sentences.append(CALLS.format(op=op))
    f.fix = hints.internal_check(who, line=line, op=op)
    return f
