"""One error and the fd text captured with it → a Diagnosis: the single path the notebook and the runner share.

The order matters and lives here once: classify the exception; read the assertion sites in the text
(spliced fragments recovered from the catalogue); when a site is there, a library error that only
surfaced the assert (cuBLAS, cuDNN, Triton, ...) counts as its follow-on; then evidence and rules.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping, Sequence
from typing import Any

from cudaassert_ipy.capture.assert_lines import AssertSite, scan_all
from cudaassert_ipy.diagnose.detection import Detection, classify
from cudaassert_ipy.diagnose.diagnosis import Diagnosis, diagnose
from cudaassert_ipy.diagnose.evidence import Evidence, collect
from cudaassert_ipy.diagnose.launched import read_launched, relabel
from cudaassert_ipy.diagnose.recovered import recover
from cudaassert_ipy.frameworks import ADAPTERS, Adapter

__all__ = ["diagnose_failure", "read_failure", "sites_in"]


def sites_in(text: str) -> list[AssertSite]:
    """Every assertion site in ``text``, with whole catalogued conditions recovered from spliced lines."""
    if not text:
        return []
    scanned = scan_all(text)
    return scanned.sites + recover(scanned.orphans, scanned.sites)[0]


def read_failure(
    error: BaseException, text: str, context_dead: bool = False
) -> tuple[Detection | None, list[AssertSite]]:
    """The detection (None: not a failure of ours) and the assertion sites that came with ``error``. When
    ``error`` only wraps a child process's failure (a launcher, an engine), the child's error and lines."""
    launched = read_launched(error, text, context_dead)
    if launched is not None:
        _, child_text = launched
        sites = sites_in(child_text)
        if sites:
            launched = read_launched(error, text, context_dead, sites_seen=True)
        detection = launched[0] if launched is not None else None
        return detection, sites if detection is not None else []
    detection = classify(error, context_dead=context_dead)
    sites = sites_in(text)
    if sites:  # an assertion line came with this error: a library error only surfaced it (issue #10)
        detection = classify(error, context_dead=context_dead, assert_seen=True) or detection
    return detection, sites


def diagnose_failure(
    detection: Detection,
    sites: list[AssertSite],
    text: str = "",
    source: str = "",
    execution_count: int | None = None,
    user_ns: Mapping[str, Any] | None = None,
    user_files: Container[str] = (),
    adapters: Sequence[Adapter] = ADAPTERS,
) -> tuple[Evidence, Diagnosis]:
    """Evidence and Diagnosis for a failure ``read_failure`` found; the detection's note (follow-on) goes first.
    ``adapters``: the framework adapters asked (all of them; only those whose framework is imported run)."""
    evidence = collect(detection, sites, source, execution_count, user_ns, text, user_files, adapters)
    diagnosis = diagnose(evidence)
    if detection.note:
        diagnosis = dataclasses.replace(diagnosis, notes=(detection.note, *diagnosis.notes))
    if detection.launch is not None:
        diagnosis = relabel(diagnosis, detection)
    return evidence, diagnosis
