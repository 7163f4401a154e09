"""Render a Diagnosis as text/plain, text/html and markdown. No decisions are made here.

The text form is complete on its own: headless runs (nbconvert, papermill, Kaggle "Save
Version") and frontends without a widget manager show it instead of the panel.
"""

from __future__ import annotations

import html
from typing import Any

from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.wording import PREFIX

__all__ = ["Banner", "Report", "banner_text", "to_html", "to_markdown", "to_text"]

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


def _user_line(d: Diagnosis) -> str | None:
    if d.user_line is None:
        return None
    _, lineno, code = d.user_line
    return f"line {lineno}: {code}"


def to_text(d: Diagnosis, gpu_state: str | None = None) -> str:
    lines = [f"{PREFIX} {d.status}", f"{PREFIX} {d.headline}", ""]
    if d.specific:
        lines += [f"Cause: {d.specific}", ""]
    lines += [f"What it means: {d.explanation}", "", f"Fix: {d.fix}"]
    if _user_line(d):
        lines += ["", f"Your code: {_user_line(d)}"]
    if d.assert_sites:
        lines += ["", "Kernel assertion (folded):"] + [f"  {s}" for s in d.assert_sites]
    if d.facts:
        lines += ["", "Evidence:"] + [f"  {k}: {v}" for k, v in d.facts]
    lines += ["", f"Exception: {d.exception_line}"]
    if gpu_state:
        lines += [f"GPU: {gpu_state}"]
    lines += [f"Note: {n}" for n in d.notes]
    return "\n".join(lines)


def to_markdown(d: Diagnosis, gpu_state: str | None = None) -> str:
    out = [f"**{d.status}**", "", f"### {d.headline}", ""]
    if d.specific:
        out += [f"**Cause:** {d.specific}", ""]
    out += [f"**What it means:** {d.explanation}", "", f"**Fix:** {d.fix}", ""]
    if _user_line(d):
        out += [f"**Your code:** `{_user_line(d)}`", ""]
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


_STYLE = (
    "border-left:4px solid var(--jp-error-color1,#d32f2f);padding:6px 10px;margin:4px 0;"
    "background:var(--jp-layout-color2,#f7f7f7);color:var(--jp-ui-font-color1,#222);"
    "font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px)"
)
_ALIVE_STYLE = _STYLE.replace("--jp-error-color1,#d32f2f", "--jp-success-color1,#388e3c")
_MONO = "font-family:var(--jp-code-font-family,monospace);white-space:pre-wrap;margin:2px 0"


def _e(s: Any) -> str:
    return html.escape(str(s))


def to_html(d: Diagnosis, gpu_state: str | None = None) -> str:
    parts = [f'<div class="cudaassert-report" style="{_STYLE if d.context_dead else _ALIVE_STYLE}">',
             f"<div><b>{_e(d.status)}</b></div>",
             f'<div style="font-size:1.1em;margin-top:4px"><b>{_e(d.headline)}</b></div>']
    if d.specific:
        parts.append(f"<p><b>Cause:</b> {_e(d.specific)}</p>")
    parts.append(f"<p><b>What it means:</b> {_e(d.explanation)}</p><p><b>Fix:</b> {_e(d.fix)}</p>")
    if _user_line(d):
        parts.append(f'<div><b>Your code:</b> <code>{_e(_user_line(d))}</code></div>')
    if d.assert_sites:
        parts.append("<div><b>Kernel assertion:</b></div>")
        parts += [f'<pre style="{_MONO}">{_e(s)}</pre>' for s in d.assert_sites]
    if d.facts:
        parts.append("<div><b>Evidence:</b><ul style='margin:2px 0'>")
        parts += [f"<li><code>{_e(k)}</code>: {_e(v)}</li>" for k, v in d.facts]
        parts.append("</ul></div>")
    parts.append(f"<div><b>Exception:</b> <code>{_e(d.exception_line)}</code></div>")
    if gpu_state:
        parts.append(f"<div><b>GPU:</b> {_e(gpu_state)}</div>")
    raw = "\n".join([d.exception_text.strip(), *d.assert_raw])
    parts.append(f'<details><summary>Details</summary><pre style="{_MONO}">{_e(raw)}</pre></details>')
    parts += [f"<div><i>{_e(n)}</i></div>" for n in d.notes]
    parts.append("</div>")
    return "".join(parts)


class Report:
    """A displayable report: IPython picks text/plain or text/html from the bundle."""

    def __init__(self, diagnosis: Diagnosis, gpu_state: str | None = None) -> None:
        self.diagnosis = diagnosis
        self.gpu_state = gpu_state

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {
            "text/plain": to_text(self.diagnosis, self.gpu_state),
            "text/html": to_html(self.diagnosis, self.gpu_state),
            "text/markdown": to_markdown(self.diagnosis, self.gpu_state),
        }

    def __repr__(self) -> str:
        return to_text(self.diagnosis, self.gpu_state)


class Banner:
    """The one line shown for each later failure of a dead context."""

    def __init__(self, original: Diagnosis) -> None:
        self.text = banner_text(original)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text,
                "text/html": f'<div class="cudaassert-banner" style="{_STYLE}">{_e(self.text)}</div>'}

    def __repr__(self) -> str:
        return self.text
