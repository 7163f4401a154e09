"""``%cudaassert fix [apply [--restart]]``, the proposal behind ``proposed_fix()``, the check after the replay.

The kernel side of issue #26: the diagnosis's culprit, this kernel's history and a scan of the
training data go to ``fix.derive``; applying a patch replaces the cell's code in the history (so a
restart replays the patched code), shows the apply request a frontend extension consumes
(``fix.PATCH_MIME``), and, with ``--restart``, restarts with validators on. The restarted kernel
runs :func:`verify`: a preflight of the data under the new facts, then one step of the failing cell
on the failing batch (the whole cell only when asked), and says one of three outcomes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.base.wording import PREFIX, error_line
from cudaassert_ipy.fix.model import NONE, PATCH_MIME, Alternative, CellSource, LabelSurvey, ProposedFix

if TYPE_CHECKING:
    from cudaassert_ipy.restart.frontend import Frontend
    from cudaassert_ipy.restart.plan import ResumePlan
    from cudaassert_ipy.shell.extension import Extension
    from cudaassert_ipy.view.actions import FixActions

__all__ = ["FixError", "apply", "fix_text", "panel_actions", "proposed", "show", "verify"]

NO_FAILURE = "no patch: no CUDA failure has been diagnosed in this kernel yet"
CHOOSE = "The data does not decide: choose an alternative with `%cudaassert fix apply --choose N` (N = {numbers})."
NO_PATCH_CHOSEN = "Alternative {n} has no patch ({why}); nothing was applied."
EDITED = "Cell [{number}] ran again or changed since the patch was proposed: run `%cudaassert fix` again."
APPLIED = "{prefix} Patched cell [{number}] in this kernel's history: a restart replays the patched code. {where}"
IN_NOTEBOOK = "In JupyterLab and Notebook 7 the patch's Apply buttons edit the notebook's cell too (undo reverts it)."
COPY = "Where no frontend edits notebooks (Colab, Kaggle, VS Code, a batch run), copy the patched cell into it."
BUTTON_DONE = "Patched cell [{number}]: {title}.{restart}"
FILE_BUTTON_DONE = "Patched {path} on disk (no cell changes): {title}. Run the training again to check."
NO_RESTART = "this kernel cannot be restarted from here ({detail}): Apply, then restart it yourself"
FILE_APPLIED = "{prefix} Patched {path} ({title}); run the training again to check."
FILE_CHANGED = "{path} changed since the patch was proposed: run `%cudaassert fix` again."
FIXED = "{prefix} fixed: cell [{number}] ran to the end with validators on, and all {n} samples are in range."
FIXED_NO_DATA = "{prefix} fixed: cell [{number}] ran to the end with validators on."
NOT_ENOUGH = "{prefix} the patch was not enough: cell [{number}] failed again ({error}); its diagnosis is above."
MORE_BAD = "{prefix} preflight found {k} more bad samples: {rows}."
NOT_RUN = (
    "{prefix} preflight: all {n} samples are in range; cell [{number}] was not run again (it reads no "
    "DataLoader to shrink to the failing batch): run it to check, or `%cudaassert fix apply --restart --full`."
)


class FixError(ValueError):
    """A usage mistake in ``%cudaassert fix``; the message says how to fix it."""


def _failing_index(ext: Extension, number: int | None) -> int | None:
    rec = ext.history.failing(number)
    return rec.index if rec is not None else None


def proposed(ext: Extension, budget_s: float | None = None) -> ProposedFix:
    """The patch for the last diagnosed failure, from this kernel's history (up to the failing cell).

    ``budget_s``: how long the scan of the training set may take (the panel's; ``%cudaassert fix`` has none):
    past it, the data gives no evidence and nothing is preselected."""
    d = ext.state.dead_since or ext.last
    if d is None:
        return ProposedFix(NONE, why=NO_FAILURE)
    from cudaassert_ipy.fix import derive

    limit = _failing_index(ext, d.cell)
    cells = [
        CellSource(r.number, r.cell_id, r.source, r.ok)
        for r in ext.history.records
        if limit is None or r.index <= limit
    ]
    ns = ext.shell.user_ns
    survey = None
    c = d.culprit
    if c is not None and c.kind == "class_labels":
        survey = _survey(ext, ns, c.dataset, c.facts, budget_s)
    resizable = derive.resizable_roots(c, ns)
    return derive.propose(d, cells, survey, resizable)


def _survey(
    ext: Extension, ns: Mapping[str, Any], declared: str | None, facts: Any, budget_s: float | None = None
) -> LabelSurvey | None:
    """The training set behind the failure (the failing loader's dataset, else the one that declared the classes),
    scanned whole; None when none is known or it cannot be read."""
    from cudaassert_ipy.fix.survey import survey_from

    candidates = []
    failing = ext.samples.failing if ext.samples is not None else None
    if failing is not None and failing.loader:
        candidates.append(failing.loader)
    if declared:
        candidates.append(declared)
    return survey_from(ns, candidates, facts.n_classes, facts.ignore_index, budget_s)


def fix_text(fix: ProposedFix) -> str:
    """``%cudaassert fix``: the alternatives, each with its evidence and diff (view/fix_report.py), and how to apply."""
    from cudaassert_ipy.view.fix_report import fix_lines

    if fix.safety == NONE:
        return f"{PREFIX} {fix.why}"
    lines = fix_lines(fix)
    if fix.default is None:
        lines.append(CHOOSE.format(numbers=", ".join(str(i) for i, a in enumerate(fix.alternatives, 1) if a.patch)))
    else:
        lines.append("Apply it with `%cudaassert fix apply` (add `--restart` to restart, replay and verify).")
    return "\n".join(lines)


def show(fix: ProposedFix) -> None:
    """``%cudaassert fix``: the text, and beside it the proposal the frontend extension renders with its Apply
    buttons (a bundle: where no extension runs, the text alone shows)."""
    if not any(a.patch is not None for a in fix.alternatives):
        print(fix_text(fix))
        return
    from cudaassert_ipy.view.display import display

    display({PATCH_MIME: fix.proposal(), "text/plain": fix_text(fix)}, raw=True)


def _chosen(fix: ProposedFix, choose: int | None) -> Alternative:
    if fix.safety == NONE:
        raise FixError(fix.why)
    if choose is None:
        if fix.chosen is None:
            raise FixError(
                CHOOSE.format(numbers=", ".join(str(i) for i, a in enumerate(fix.alternatives, 1) if a.patch))
            )
        return fix.chosen
    if not 1 <= choose <= len(fix.alternatives):
        raise FixError(f"`--choose {choose}`: there are {len(fix.alternatives)} alternatives (1..)")
    alt = fix.alternatives[choose - 1]
    if alt.patch is None:
        raise FixError(NO_PATCH_CHOSEN.format(n=choose, why=alt.no_patch))
    return alt


def apply(
    ext: Extension,
    fix: ProposedFix,
    choose: int | None = None,
    restart: bool = False,
    full: bool = False,
    in_notebook: bool = False,
) -> Alternative:
    """Apply the chosen alternative's patch (the buttons and ``%cudaassert fix apply`` both come here).

    ``in_notebook``: the frontend extension's buttons ran this and edit the notebook's cell once the apply
    request below arrives, so the replay does not say the notebook holds the old code."""
    alt = _chosen(fix, choose)
    d = ext.state.dead_since or ext.last
    failing = ext.history.failing(d.cell if d is not None else None)
    patch = alt.patch
    assert patch is not None  # _chosen returns patched alternatives only
    if patch.path is not None:
        return _apply_file(ext, patch.path, patch.old_source, patch.new_source, alt, restart)
    try:
        ext.history.apply_patch(patch.number, patch.old_source, patch.new_source)
    except LookupError:
        raise FixError(EDITED.format(number=patch.number)) from None
    from cudaassert_ipy.view.display import display

    display({PATCH_MIME: patch.request(), "text/plain": patch.new_source}, raw=True)
    print(
        APPLIED.format(
            prefix=PREFIX, number=patch.number, where="" if in_notebook else f"{IN_NOTEBOOK} {COPY}"
        ).rstrip()
    )
    if restart:
        from cudaassert_ipy.restart.frontend import detect
        from cudaassert_ipy.restart.plan import AppliedFix, Mode
        from cudaassert_ipy.restart.request import request_restart

        applied = AppliedFix(
            patch.number,
            patch.cell_id,
            patch.diff,
            alt.title,
            dataset=fix.dataset,
            num_classes=alt.num_classes if alt.num_classes is not None else fix.num_classes,
            ignore_index=alt.ignore_index if alt.num_classes is not None else fix.ignore_index,
            vocab_size=fix.vocab_size,
            full=full,
            in_notebook=in_notebook,
            failing_number=failing.number if failing is not None else None,
            failing_source=failing.source if failing is not None else "",
        )
        request_restart(ext, detect(ext.shell), Mode.DEBUG, fix=applied)
    return alt


def _apply_file(ext: Extension, path: str, old: str, new: str, alt: Alternative, restart: bool) -> Alternative:
    """A file patch (Ultralytics' data YAML): written only here, when asked, and only over the text it was derived
    from; no cell changes, so a restart replays the setup as it was and the next training run reads the file."""
    import os

    from cudaassert_ipy.base.atomic_file import write_atomic

    try:
        with open(path, encoding="utf-8") as fp:
            if fp.read() != old:
                raise FixError(FILE_CHANGED.format(path=path))
        write_atomic(path, new, mode=os.stat(path).st_mode & 0o777)
    except OSError as e:
        raise FixError(f"{path}: {e.strerror or e}") from None
    from cudaassert_ipy.view.display import display

    request = alt.patch.request() if alt.patch is not None else None  # what the frontend extension names
    text = FILE_APPLIED.format(prefix=PREFIX, path=path, title=alt.title)
    display({PATCH_MIME: request, "text/plain": text} if request is not None else {"text/plain": text}, raw=True)
    if restart:
        from cudaassert_ipy.restart.frontend import detect
        from cudaassert_ipy.restart.plan import Mode
        from cudaassert_ipy.restart.request import request_restart

        request_restart(ext, detect(ext.shell), Mode.DEBUG)
    return alt


def panel_actions(ext: Extension, fix: ProposedFix, frontend: Frontend) -> FixActions:
    """The panel's fix section: its Apply buttons call :func:`apply`, the path of ``%cudaassert fix apply``."""
    from cudaassert_ipy.restart.frontend import edits_cells
    from cudaassert_ipy.restart.plan import FrontendKind
    from cudaassert_ipy.view.actions import FixActions

    def on_apply(choose: int | None, restart: bool) -> str:
        alt = apply(ext, fix, choose, restart)
        patch = alt.patch
        if patch is not None and patch.path is not None:
            return FILE_BUTTON_DONE.format(path=patch.path, title=alt.title)
        number = patch.number if patch is not None else None
        return BUTTON_DONE.format(
            number=number,
            title=alt.title,
            restart=" Restarting: the replay runs it."
            if restart
            else " Restart to run it (the replay runs the patched cell).",
        )

    restart_disabled = NO_RESTART.format(detail=frontend.detail) if frontend.kind is FrontendKind.HEADLESS else None
    return FixActions(fix, on_apply if fix.safety != NONE else None, edits_cells(frontend), restart_disabled)


# -- after the replay ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _one_batch(ns: dict[str, Any], plan: ResumePlan) -> Iterator[bool]:
    """Every DataLoader of the namespace shrunk to one batch (the failing one where the plan names it) while the
    block runs; yields whether there was any."""
    import torch.utils.data

    from cudaassert_ipy.data import reproduce

    saved = {k: v for k, v in ns.items() if isinstance(v, torch.utils.data.DataLoader) and not k.startswith("_")}
    try:
        for name, loader in saved.items():
            indices: Any = None
            if plan.failing_batch is not None and plan.failing_batch[0] == name:
                indices = plan.failing_batch[1]
            size = len(loader.dataset) if hasattr(loader.dataset, "__len__") else None
            if indices is None or (size is not None and max(indices, default=0) >= size):
                indices = range(min(size or 0, loader.batch_size or 1))
            ns[name] = reproduce.failing_loader(loader, list(indices))
        yield bool(saved)
    finally:
        ns.update(saved)


def verify(ext: Extension, plan: ResumePlan) -> str:
    """Preflight under the new facts, then the failing cell on one batch; prints and returns the outcome line."""
    fix = plan.fix
    if fix is None or not fix.failing_source.strip():
        return ""
    ns = ext.shell.user_ns
    n = 0
    if fix.dataset is not None and fix.dataset in ns and (fix.num_classes or fix.vocab_size):
        from cudaassert_ipy.checks.preflight import preflight

        try:
            report: Any = preflight(
                ns[fix.dataset],
                num_classes=fix.num_classes,
                vocab_size=fix.vocab_size,
                ignore_index=fix.ignore_index,
                progress=False,
            )
        except Exception:  # an object preflight cannot read (a dataset-like holder of class names): the cell decides
            report = None
        n = report.n_samples if report is not None else 0
        if report is not None and not report.ok:
            rows = report.bad_samples
            text = MORE_BAD.format(prefix=PREFIX, k=len(rows), rows=", ".join(map(str, rows[:20])))
            print(text)
            return text
    with _one_batch(ns, plan) as shrunk:
        if not shrunk and not fix.full:
            text = NOT_RUN.format(prefix=PREFIX, n=n, number=fix.failing_number)
            print(text)
            return text
        result = ext.shell.run_cell(fix.failing_source, store_history=False)
    error = result.error_in_exec or result.error_before_exec
    if error is not None:
        text = NOT_ENOUGH.format(prefix=PREFIX, number=fix.failing_number, error=error_line(error))
    elif n:
        text = FIXED.format(prefix=PREFIX, number=fix.failing_number, n=n)
    else:
        text = FIXED_NO_DATA.format(prefix=PREFIX, number=fix.failing_number)
    print(text)
    return text
