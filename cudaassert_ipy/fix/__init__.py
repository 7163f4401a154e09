"""The fix as a patch: from a diagnosis's culprit to the cell that defined it, an edit of that cell (LibCST),
its safety class and its alternatives, as a frozen :class:`ProposedFix`.

Between data and view: the panel renders a ``ProposedFix``, the restart replays a patched cell. The
history comes in as plain frozen values (:class:`CellSource`), the data's evidence as a
:class:`LabelSurvey` (``fix.survey`` scans a dataset with preflight's reader). LibCST is imported only
when a patch is derived.
"""

from cudaassert_ipy.fix.model import (
    DECISION,
    NONE,
    PATCH_MIME,
    SAFE,
    Alternative,
    CellSource,
    LabelSurvey,
    Patch,
    ProposedFix,
)

__all__ = ["DECISION", "NONE", "PATCH_MIME", "SAFE", "Alternative", "CellSource", "LabelSurvey", "Patch", "ProposedFix"]
