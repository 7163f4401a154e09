"""Rule for repeat_interleave's output_size check: the printf form of the assert names both sizes.

Since the assert became ``CUDA_KERNEL_ASSERT_PRINTF`` the kernel also prints, on stdout,
``[CUDA_KERNEL_ASSERT] ...: Assertion failed: `result_size == cumsum_ptr[size - 1]`: Invalid input! In
`repeat_interleave`, the `output_size` argument (30364) must be the same as the sum of the elements in
the `repeats` tensor (30365).`` The two numbers are the whole fix.
"""

from __future__ import annotations

import re

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding

__all__ = ["repeat_sizes"]

SIZES = "repeat_interleave got output_size={given}, but the repeats add up to {required}."
_SIZES = re.compile(r"`output_size` argument \((\d+)\).*?`repeats` tensor \((\d+)\)")


def repeat_sizes(case: Case) -> Finding | None:
    for site in case.ev.sites:
        m = _SIZES.search(site.message or "")
        if m is not None:
            given, required = int(m.group(1)), int(m.group(2))
            f = Finding(op="repeat_interleave")
            f.sentences.append(SIZES.format(given=given, required=required))
            f.facts.append(("output_size", f"{given} (repeats.sum() = {required})"))
            f.fix = hints.OUTPUT_SIZE.format(required=required)
            return f
    return None
