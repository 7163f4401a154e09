"""One failure path for the notebook and the runner: diagnose, name the samples, say the context's state.

Why here: the extension (shell/) and the runner (run/) both turn a failure read by ``read_failure`` into the
Diagnosis they show, and the bookmark's samples belong in it either way; data/ is the lowest layer that knows
both the diagnosis and the bookmark, so the sequence is written once, below both frontends.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cudaassert_ipy.data.bookmark import Bookmark
    from cudaassert_ipy.data.samples import SampleCheck
    from cudaassert_ipy.diagnose.detection import Detection
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis

__all__ = ["explain_failure"]


def explain_failure(
    detection: Detection,
    sites: list[Any],
    text: str,
    *,
    source: str = "",
    execution_count: int | None = None,
    user_ns: Mapping[str, Any] | None = None,
    user_files: Container[str] = (),
    bookmark: Bookmark | None = None,
    dead_status: str | None = None,
) -> tuple[Diagnosis, SampleCheck | None]:
    """The Diagnosis (with the bookmark's samples when there is a bookmark) and the samples' check.

    ``sites``: the assertion sites ``read_failure`` found (capture's, passed through: data/ does not import capture).
    ``dead_status``: the status line a frontend gives a dead GPU context (None keeps the diagnosis's own).
    """
    from cudaassert_ipy.diagnose.pipeline import diagnose_failure

    evidence, diagnosis = diagnose_failure(detection, sites, text, source, execution_count, user_ns, user_files)
    check = None
    if bookmark is not None:  # the DataLoader's last batches: which dataset samples hold the bad values
        from cudaassert_ipy.data.post_mortem import annotate

        diagnosis, check = annotate(bookmark, diagnosis, evidence, user_ns or {})
    if dead_status is not None and diagnosis.context_dead:
        diagnosis = dataclasses.replace(diagnosis, status=dead_status)
    return diagnosis, check
