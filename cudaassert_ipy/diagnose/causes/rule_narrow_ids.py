"""Rule for a negative id that is a valid id wrapped by a 16-bit integer.

A lookup that names a negative index and the size of its table (``Tried to access index -28619 out of table with
119546 rows``) says more than "negative": when ``value + 65536`` is a row of the table, the id was valid and was
stored in int16 on the way (a preprocessing script's ``np.int16``, ``torch.int16``): ids above 32767 wrap.
"""

from __future__ import annotations

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding

__all__ = ["int16_wrapped"]

_WRAP = 1 << 16
WRAPPED = "The lookup got the id {value}, and {value} + 65536 = {wrapped} is a row of its table of {size} rows."


def int16_wrapped(case: Case) -> Finding | None:
    twin = case.ev.detection.twin
    value = case.value
    size = twin.size if twin is not None else None
    if value is None or size is None or not -(_WRAP // 2) <= value < 0 or value + _WRAP >= size:
        return None
    wrapped = value + _WRAP
    f = Finding()
    f.sentences.append(WRAPPED.format(value=value, wrapped=wrapped, size=size))
    f.facts.append(("index", f"{value} (as int16 of {wrapped}); table: {size} rows"))
    f.fix = hints.INT16_WRAPPED.format(value=value, wrapped=wrapped)
    return f
