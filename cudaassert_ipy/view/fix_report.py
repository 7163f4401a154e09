"""A proposed fix (``fix.ProposedFix``) as text and HTML: the alternatives side by side, each with its evidence,
the cell it changes and why that one, and its diff. No decisions are made here.

The text form is what headless runs, the script runner and ``%cudaassert fix`` print; the HTML form
is the panel's fix section and the static report's. Standard library only (the runner uses it bare).
"""

from __future__ import annotations

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.fix.model import DECISION, NONE, SAFE, Alternative, Patch, ProposedFix
from cudaassert_ipy.view.style import block, escape

__all__ = ["CLASS_WORDS", "diff_html", "fix_html", "fix_lines", "fix_text", "where_text"]

#: the safety class in words (the panel's badge, the text's first line)
CLASS_WORDS = {SAFE: "safe", DECISION: "decision", NONE: "no patch"}
NO_DEFAULT = "The data does not decide: nothing is applied until you choose one."
DEFAULT_MARK = "(the data decides for this one)"


def where_text(patch: Patch) -> str:
    """'cell [5] (id 3f2a…): cell [5] built `model.head` (...)': the cell it changes, and why that one."""
    if patch.path is not None:  # a file patch: why_cell starts with the file's name
        return patch.why_cell
    number = f"[{patch.number}]" if patch.number is not None else "(no execution count)"
    return f"cell {number}: {patch.why_cell}"


def fix_lines(fix: ProposedFix) -> list[str]:
    """The fix's lines: the class and why, then each alternative with its evidence and diff, the default marked."""
    if fix.safety == NONE:
        return [f"{PREFIX} No patch: {fix.why}"] if fix.why else []
    lines = [f"{PREFIX} Proposed fix for `{fix.culprit}` ({CLASS_WORDS[fix.safety]}): {fix.why}."]
    for i, alt in enumerate(fix.alternatives, 1):
        mark = f" {DEFAULT_MARK}" if fix.default == i - 1 and fix.safety == DECISION else ""
        lines.append(f"[{i}]{mark} {alt.title}")
        if alt.evidence:
            lines.append(f"    evidence: {alt.evidence}")
        if alt.patch is not None:
            lines.append(f"    changes {where_text(alt.patch)}")
            lines += ["    " + ln for ln in alt.patch.diff.rstrip("\n").splitlines()]
        else:
            lines.append(f"    no patch: {alt.no_patch}")
    if fix.safety == DECISION and fix.default is None:
        lines.append(NO_DEFAULT)
    return lines


def fix_text(fix: ProposedFix) -> str:
    return "\n".join(fix_lines(fix))


def diff_html(diff: str) -> str:
    """A unified diff in a ``pre``, added and removed lines marked (classes only: the panel's style colours them)."""
    rows = []
    for line in diff.rstrip("\n").splitlines():
        kind = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "ctx"
        )
        rows.append(f'<span class="ca-diff-{kind}">{escape(line)}</span>')
    return '<pre class="cudaassert-diff">' + "\n".join(rows) + "</pre>"


def _alternative_html(i: int, alt: Alternative, default: bool) -> str:
    mark = f' <span class="ca-muted">{escape(DEFAULT_MARK)}</span>' if default else ""
    parts = [f'<div class="ca-label">[{i}] {escape(alt.title)}{mark}</div>']
    if alt.evidence:
        parts.append(f"<p><b>Evidence:</b> {escape(alt.evidence)}</p>")
    if alt.patch is not None:
        parts.append(f'<p class="ca-muted">Changes {escape(where_text(alt.patch))}</p>')
        parts.append(diff_html(alt.patch.diff))
    else:
        parts.append(f'<p class="ca-muted">No patch: {escape(alt.no_patch)}</p>')
    return f'<div class="cudaassert-alternative">{"".join(parts)}</div>'


def fix_html(fix: ProposedFix) -> str:
    """The fix section: class and why, the alternatives side by side (the default first), each with its diff."""
    if fix.safety == NONE:
        return block(f'<p class="ca-muted">No patch: {escape(fix.why)}</p>') if fix.why else ""
    head = (
        f'<div class="ca-label">Proposed fix for <code>{escape(fix.culprit)}</code>: '
        f'<span class="cudaassert-fix-{fix.safety}">{escape(CLASS_WORDS[fix.safety])}</span></div>'
        f"<p>{escape(fix.why)}.</p>"
    )
    alts = "".join(
        _alternative_html(i, a, fix.default == i - 1 and fix.safety == DECISION)
        for i, a in enumerate(fix.alternatives, 1)
    )
    side = f'<div class="cudaassert-alternatives" style="display:flex;flex-wrap:wrap;gap:8px">{alts}</div>'
    tail = f'<p class="ca-muted">{escape(NO_DEFAULT)}</p>' if fix.safety == DECISION and fix.default is None else ""
    return block(head, side, tail, cls="ca-text cudaassert-fix")
