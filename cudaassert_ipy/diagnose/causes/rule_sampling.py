"""Rule for multinomial's checks when the kernel's own condition says which one failed: a row whose sum is inf.

``!isinf(sum)`` (THC's sampleMultinomialOnce, ``!THCNumerics<accscalar_t>::isinf(sum)`` later) fails when every
weight is finite but their sum overflows the float type: the weights are too large, not NaN.
"""

from __future__ import annotations

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding

__all__ = ["sum_overflow"]

SUM_INF = "The kernel's check `{condition}` failed: a row's weights summed to inf (they overflow the float type)."


def sum_overflow(case: Case) -> Finding | None:
    for site in case.ev.sites:
        condition = site.condition.replace(" ", "")
        if "isinf(sum)" in condition:
            f = Finding(op="multinomial")
            f.sentences.append(SUM_INF.format(condition=site.condition))
            f.fix = hints.SAMPLING_SUM_INF
            return f
    return None
