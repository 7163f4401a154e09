"""The runner's fix: the patch of the script (or of a module the user owns) that defined the culprit.

The "history" of a script is its own files: the user files the traceback passed through, the script
last (it is what ran, as the failing cell is in a notebook). The patch is printed as a unified diff
against the file; it is written into the file only with ``--apply-fix``, and only when the file still
holds the code it was derived from. ``--report-json`` carries it as a ``fix`` object.
"""

from __future__ import annotations

import os
import types
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.base.wording import PREFIX

if TYPE_CHECKING:
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.fix.model import ProposedFix

__all__ = ["APPLIED", "NOT_APPLIED", "SHOWN", "apply_fix", "fix_data", "propose", "user_sources"]

SHOWN = "{prefix} The patch is shown, not applied: rerun with --apply-fix to write it into {path}."
APPLIED = "{prefix} Patched {path} ({title}); run the script again to check."
NOT_APPLIED = "{prefix} --apply-fix: nothing was written ({why})."
CHANGED = "{path} changed since the patch was derived"
NO_DEFAULT = "the data does not decide between the alternatives: edit the file with the one you choose"


def _display_path(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


MAX_MODULES = 50  # the user's own modules read besides the traceback's files


def user_sources(tb: types.TracebackType | None, user_files: Container[str]) -> list[tuple[str, str]]:
    """(shown path, text) of the user's files: the modules the script imported from its own folder (where a
    class like ``Net`` is defined), then the traceback's files, innermost first, the script last."""
    import sys

    seen: list[str] = []
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in user_files and name not in seen:
            seen.append(name)
        tb = tb.tb_next
    modules = [
        f
        for m in list(sys.modules.values())
        if isinstance(f := getattr(m, "__file__", None), str) and f in user_files and f not in seen
    ]
    seen += modules[:MAX_MODULES]
    out = []
    for name in reversed(seen):  # the outermost (the script's <module>) ends the "history", as the failing cell
        try:
            with open(name, encoding="utf-8") as fp:
                out.append((_display_path(name), fp.read()))
        except (OSError, UnicodeDecodeError):
            continue
    return out


def propose(
    diagnosis: Diagnosis, sources: list[tuple[str, str]], ns: Mapping[str, Any] | None, loader: str | None
) -> ProposedFix:
    """The proposed fix over the user's files; the data's evidence from the script's globals."""
    from cudaassert_ipy.fix import derive
    from cudaassert_ipy.fix.model import CellSource

    cells = [CellSource(None, None, text, path=path) for path, text in sources]
    c = diagnosis.culprit
    survey = None
    ns = ns or {}
    if c is not None and c.kind == "class_labels":
        from cudaassert_ipy.fix.survey import survey_from

        facts: Any = c.facts
        names = [n for n in (loader, c.dataset) if n]
        survey = survey_from(ns, names, facts.n_classes, facts.ignore_index)
    resizable = derive.resizable_roots(c, ns)
    return derive.propose(diagnosis, cells, survey, resizable)


def fix_data(fix: ProposedFix) -> dict[str, Any]:
    """The ``fix`` object of ``--report-json``: path, diff, safety class, alternatives, why."""
    patch = fix.patch
    return {
        "safety": fix.safety,
        "why": fix.why,
        "culprit": fix.culprit,
        "default": fix.default,
        "path": patch.path if patch is not None else None,
        "diff": patch.diff if patch is not None else None,
        "alternatives": [
            {
                "key": a.key,
                "title": a.title,
                "evidence": a.evidence,
                "path": a.patch.path if a.patch is not None else None,
                "diff": a.patch.diff if a.patch is not None else None,
                "why_cell": a.patch.why_cell if a.patch is not None else None,
                "no_patch": a.no_patch or None,
            }
            for a in fix.alternatives
        ],
    }


def apply_fix(fix: ProposedFix) -> str:
    """``--apply-fix``: write the patch the data decides for into its file; the line that says what happened."""
    patch = fix.patch
    if patch is None or patch.path is None:
        return NOT_APPLIED.format(prefix=PREFIX, why=NO_DEFAULT if fix.alternatives else fix.why)
    try:
        with open(patch.path, encoding="utf-8") as fp:
            if fp.read() != patch.old_source:
                return NOT_APPLIED.format(prefix=PREFIX, why=CHANGED.format(path=patch.path))
        from cudaassert_ipy.base.atomic_file import write_atomic

        mode = os.stat(patch.path).st_mode & 0o777
        write_atomic(patch.path, patch.new_source, mode=mode)
    except OSError as e:
        return NOT_APPLIED.format(prefix=PREFIX, why=f"{patch.path}: {e.strerror or e}")
    chosen = fix.chosen
    return APPLIED.format(prefix=PREFIX, path=patch.path, title=chosen.title if chosen is not None else "")
