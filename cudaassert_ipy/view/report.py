"""Render a Diagnosis as text/plain, text/html and markdown. No decisions are made here.

The text form is complete on its own: headless runs (nbconvert, papermill, Kaggle "Save
Version") and frontends without a widget manager show it instead of the panel. Each HTML
section is rendered here once; the HTML report, the headline output and the panel compose them.
Imports neither IPython nor ipywidgets: the script runner and the log explainer use it bare.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.fix.model import ProposedFix
from cudaassert_ipy.view.style import ACCENTS, block, box, escape

__all__ = [
    "Banner",
    "Report",
    "banner_text",
    "cause_html",
    "details_html",
    "evidence_html",
    "gpu_html",
    "gpu_line",
    "header_html",
    "headline_bundle",
    "samples_html",
    "to_html",
    "to_markdown",
    "to_text",
]

if TYPE_CHECKING:  # the NVML module is imported only when there is a snapshot to show (not on %load_ext)
    from cudaassert_ipy.diagnose.gpu_state import GpuState

GpuInput = Union[str, "GpuState", None]
DETAILS = "Details"
SAMPLES = "Bad samples"
FOLLOW_ON = "Follow-on:"
BASIS = "Based on:"  # what the cause rests on: the kernel's line, the error text, a frame, host facts

BANNER = (
    "{prefix} This failure is a consequence of the dead GPU context (since cell {cell}: {title}). "
    "Restart the kernel; `%cudaassert explain` shows the original diagnosis."
)
DIAGNOSIS_FAILED = (
    "{prefix} The diagnosis itself failed ({error}); the traceback above is unchanged. "
    "Please report this with `%cudaassert status`."
)


def _cell(d: Diagnosis) -> str:
    return f"[{d.cell}]" if d.cell is not None else "(unknown)"


def banner_text(original: Diagnosis) -> str:
    return BANNER.format(prefix=PREFIX, cell=_cell(original), title=original.title)


def gpu_line(gpu_state: GpuInput) -> str | None:
    """The one-line form the text and markdown reports take."""
    if gpu_state is None or isinstance(gpu_state, str):
        return gpu_state
    from cudaassert_ipy.diagnose.gpu_state import describe

    return describe(gpu_state)


def _user_line(d: Diagnosis) -> str | None:
    if d.user_line is None:
        return None
    _, lineno, code = d.user_line
    return f"line {lineno}: {code}"


def _follow_ons(d: Diagnosis) -> list[str]:
    """The later errors cleanup raised (the last one is what the traceback ends with), one line each."""
    return [f"{FOLLOW_ON} {line}" for line in d.follow_ons]


def to_text(d: Diagnosis, gpu_state: GpuInput = None, fix: ProposedFix | None = None) -> str:
    """The complete report; with ``fix``, the proposed patch after it (its diff and alternatives)."""
    gpu_state = gpu_line(gpu_state)
    lines = [f"{PREFIX} {d.status}", f"{PREFIX} {d.headline}", *_follow_ons(d), ""]
    if d.specific:
        lines += [f"Cause: {d.specific}", ""]
    lines += [f"What it means: {d.explanation}", "", f"Fix: {d.fix}"]
    if d.candidates:
        lines += ["", d.candidates[0]] + [f"  {i}. {c}" for i, c in enumerate(d.candidates[1:], 1)]
    if d.basis:
        lines += ["", f"{BASIS} {d.basis}."]
    if _user_line(d):
        lines += ["", f"Your code: {_user_line(d)}"]
    if d.samples:
        lines += ["", f"{SAMPLES}:"] + [f"  {s}" for s in d.samples]
    if d.assert_sites:
        lines += ["", "Kernel assertion (folded):"] + [f"  {s}" for s in d.assert_sites]
    if d.facts:
        lines += ["", "Evidence:"] + [f"  {k}: {v}" for k, v in d.facts]
    lines += ["", f"Exception: {d.exception_line}"]
    if gpu_state:
        lines += [f"GPU: {gpu_state}"]
    lines += [f"Note: {n}" for n in d.notes]
    if fix is not None:
        from cudaassert_ipy.view.fix_report import fix_lines

        patch_lines = fix_lines(fix)
        lines += ["", *patch_lines] if patch_lines else []
    return "\n".join(lines)


def to_markdown(d: Diagnosis, gpu_state: GpuInput = None) -> str:
    gpu_state = gpu_line(gpu_state)
    out = [f"**{d.status}**", "", f"### {d.headline}", ""]
    out += [f"**{line}**" for line in _follow_ons(d)] + ([""] if d.follow_ons else [])
    if d.specific:
        out += [f"**Cause:** {d.specific}", ""]
    out += [f"**What it means:** {d.explanation}", "", f"**Fix:** {d.fix}", ""]
    if d.candidates:
        out += [d.candidates[0], ""] + [f"{i}. {c}" for i, c in enumerate(d.candidates[1:], 1)] + [""]
    if d.basis:
        out += [f"_{BASIS} {d.basis}._", ""]
    if _user_line(d):
        out += [f"**Your code:** `{_user_line(d)}`", ""]
    if d.samples:
        out += [f"**{SAMPLES}:**", ""] + [f"- {s}" for s in d.samples] + [""]
    if d.assert_sites:
        out += ["**Kernel assertion:**", "", "```", *list(d.assert_sites), "```", ""]
    if d.facts:
        out += ["**Evidence:**", ""] + [f"- `{k}`: {v}" for k, v in d.facts] + [""]
    out += ["**Exception:**", "", "```", d.exception_text.strip() or d.exception_line, "```"]
    if d.assert_raw:
        out += ["", "**Raw assertion lines (first per site):**", "", "```", *list(d.assert_raw), "```"]
    if gpu_state:
        out += ["", f"**GPU:** {gpu_state}"]
    out += [f"\n_{n}_" for n in d.notes]
    return "\n".join(out)


# -- HTML sections: each part of a Diagnosis is rendered here once; the report, the headline output
# and the panel (view/panel.py) compose these. Markup is plain classes; view/style.py gives the look.
def accent(d: Diagnosis) -> str:
    """Red while the GPU context is dead, the calmer orange when it is alive (CPU error, validator)."""
    return ACCENTS["dead"] if d.context_dead else ACCENTS["alive"]


def _cause(d: Diagnosis) -> str:
    return f"<p><b>Cause:</b> {escape(d.specific or d.explanation)}</p>"


def header_html(d: Diagnosis, with_cause: bool = False) -> str:
    """Headline and status (and the specific cause, for the headline output that stands alone)."""
    cause = _cause(d) if with_cause and d.specific else ""
    follow = "".join(f"<p>{escape(line)}</p>" for line in _follow_ons(d))
    return block(f'<div class="ca-head">{escape(d.headline)}</div>', f"<p>{escape(d.status)}</p>", follow, cause)


def cause_html(d: Diagnosis, with_cause: bool = True) -> str:
    """Cause (the explanation when nothing specific is known), fix, and the user's line."""
    parts = [_cause(d)] if with_cause or not d.specific else []
    parts.append(f"<p><b>Fix:</b> {escape(d.fix)}</p>")
    if d.candidates:
        items = "".join(f"<li>{escape(c)}</li>" for c in d.candidates[1:])
        parts.append(f"<p>{escape(d.candidates[0])}</p><ol>{items}</ol>")
    if d.basis:
        parts.append(f'<p class="ca-muted">{escape(BASIS)} {escape(d.basis)}.</p>')
    if d.user_line is not None:
        _, lineno, code = d.user_line
        parts.append(f"<p><b>Your code</b> (line {lineno}):</p><pre>{escape(code)}</pre>")
    return block(*parts)


def evidence_html(d: Diagnosis) -> str:
    """The folded assertion sites, the host-side facts, the exception's first line."""
    parts = ['<div class="ca-label">Evidence</div>']
    if d.assert_sites:
        parts.append("<pre>" + "\n".join(escape(s) for s in d.assert_sites) + "</pre>")
    if d.facts:
        parts.append("<ul>" + "".join(f"<li><code>{escape(k)}</code>: {escape(v)}</li>" for k, v in d.facts) + "</ul>")
    parts.append(f"<p>Exception: <code>{escape(d.exception_line)}</code></p>")
    return block(*parts)


def samples_html(d: Diagnosis) -> str:
    """Which dataset samples hold the bad values (the DataLoader bookmark); empty when none were checked."""
    if not d.samples:
        return ""
    items = "".join(f"<li>{escape(s)}</li>" for s in d.samples)
    return block(f'<div class="ca-label">{SAMPLES}</div>', f'<ul class="cudaassert-samples">{items}</ul>')


def gpu_html(gpu_state: GpuInput) -> str:
    """NVML's view, one row per line (or the one line saying why it is unavailable)."""
    if gpu_state is None or isinstance(gpu_state, str):
        rows = [str(gpu_state)]
    else:
        from cudaassert_ipy.diagnose.gpu_state import describe_parts

        rows = describe_parts(gpu_state)
    body = "<br>".join(escape(r) for r in rows)
    return block('<div class="ca-label">GPU state</div>', f'<div class="ca-muted">{body}</div>')


def details_html(d: Diagnosis) -> str:
    """What it means (when a specific cause was shown instead), the notes, and the raw exception and lines."""
    raw = "\n".join(x for x in [d.exception_text.strip() or d.exception_line, *d.assert_raw] if x)
    parts = [f"<p><b>What it means:</b> {escape(d.explanation)}</p>" if d.specific else ""]
    parts += [f'<p class="ca-muted">{escape(n)}</p>' for n in d.notes]
    parts.append(f'<div class="ca-label">Raw text</div><pre class="ca-raw">{escape(raw)}</pre>')
    return block(*parts)


def to_html(d: Diagnosis, gpu_state: GpuInput = None, fix: ProposedFix | None = None) -> str:
    """The whole report as one self-contained output (inline styles): the panel's sections, Details collapsed."""
    body = [header_html(d), cause_html(d)]
    if fix is not None:
        from cudaassert_ipy.view.fix_report import fix_html

        body.append(fix_html(fix))
    body += [samples_html(d), evidence_html(d)]
    if gpu_state is not None:
        body.append(gpu_html(gpu_state))
    body.append(f"<details><summary>{DETAILS}</summary>{details_html(d)}</details>")
    return box("cudaassert-report", "".join(body), accent(d))


def headline_text(d: Diagnosis) -> str:
    cause = f"\nCause: {d.specific}" if d.specific else ""
    follow = "".join(f"\n{line}" for line in _follow_ons(d))
    return f"{PREFIX} {d.status}\n{PREFIX} {d.headline}{follow}{cause}"


def headline_bundle(d: Diagnosis) -> dict[str, str]:
    """Status, headline and the specific cause as an output of its own, readable with or without the panel."""
    return {"text/plain": headline_text(d), "text/html": box("cudaassert-headline", header_html(d, True), accent(d))}


class Report:
    """A displayable report: IPython picks text/plain or text/html from the bundle."""

    def __init__(self, diagnosis: Diagnosis, gpu_state: GpuInput = None, fix: ProposedFix | None = None) -> None:
        self.diagnosis = diagnosis
        self.gpu_state = gpu_state
        self.fix = fix  # the proposed patch: headless runs show its diff too

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        md = to_markdown(self.diagnosis, self.gpu_state)
        if self.fix is not None:
            from cudaassert_ipy.view.fix_report import fix_text

            text = fix_text(self.fix)
            md += f"\n\n```\n{text}\n```" if text else ""
        return {
            "text/plain": to_text(self.diagnosis, self.gpu_state, self.fix),
            "text/html": to_html(self.diagnosis, self.gpu_state, self.fix),
            "text/markdown": md,
        }

    def __repr__(self) -> str:
        return to_text(self.diagnosis, self.gpu_state, self.fix)


class Banner:
    """The one line shown for each later failure of a dead context."""

    def __init__(self, original: Diagnosis) -> None:
        self.text = banner_text(original)

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": box("cudaassert-banner", escape(self.text), ACCENTS["dead"])}

    def __repr__(self) -> str:
        return self.text
