"""The one look of every HTML output (report, headline, panel, banners): a table of CSS rules, used two ways.

Why two ways from one table: the panel's widgets render their HTML as given, so the panel carries
one scoped ``<style>`` block and its markup stays plain classes. Outputs that live on in the saved
notebook (report, headline, banners) are shown by frontends that strip ``<style>`` blocks
(nbconvert's sanitizer, JupyterLab for untrusted notebooks, GitHub's viewer), so there the same
declarations go inline on each element. Colours are JupyterLab theme variables with light-theme
fallbacks; no external assets. Standard library only.
"""

from __future__ import annotations

import html
import re

__all__ = ["ACCENTS", "ALIVE", "ROOT", "block", "box", "escape", "inline", "stylesheet"]

ROOT = "cudaassert-panel"  # the panel's root class; the stylesheet is scoped to it
ALIVE = "cudaassert-alive"  # added to the root when the GPU context is alive: the calmer accent
ACCENTS = {
    "dead": "var(--jp-error-color1,#d32f2f)",
    "alive": "var(--jp-warn-color1,#f57c00)",
    "info": "var(--jp-info-color1,#0288d1)",
}
_CODE_FONT = "font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,12px)"
#: the box every output sits in; ``{accent}`` is the left border (and the headline's colour)
BOX = (
    "border-left:4px solid {accent};padding:2px 10px 6px 10px;margin:4px 0;line-height:1.45;"
    "background:var(--jp-layout-color1,#fff);color:var(--jp-ui-font-color1,#212121);"
    "font-family:var(--jp-ui-font-family,sans-serif);font-size:var(--jp-ui-font-size1,13px)"
)
#: selector inside the box (a class ``.x`` or a tag name) -> declarations
RULES: tuple[tuple[str, str], ...] = (
    (".ca-text", "white-space:normal;line-height:1.45"),
    ("p", "margin:2px 0"),
    (".ca-head", "font-weight:bold;font-size:1.1em;color:{accent}"),
    (".ca-label", "font-weight:bold;color:var(--jp-ui-font-color2,#616161);margin-top:4px"),
    (".ca-muted", "color:var(--jp-ui-font-color2,#616161);font-size:0.92em"),
    ("code", _CODE_FONT),
    (
        "pre",
        _CODE_FONT + ";white-space:pre-wrap;word-break:normal;overflow-wrap:anywhere;margin:2px 0;"
        "padding:3px 6px;background:var(--jp-layout-color2,#eee);border:1px solid var(--jp-border-color2,#e0e0e0);"
        "color:var(--jp-content-font-color1,#212121)",
    ),
    ("ul", "margin:0;padding-left:1.4em"),
    (".ca-diff-add", "color:var(--jp-success-color1,#2e7d32)"),  # a patch's diff (view/fix_report.py)
    (".ca-diff-del", "color:var(--jp-error-color1,#c62828)"),
    (
        ".cudaassert-alternative",
        "flex:1 1 22em;min-width:0;padding:2px 6px;border:1px solid var(--jp-border-color2,#e0e0e0)",
    ),
)
#: left to the frontend in standalone outputs: its own ``<code>`` style already follows its theme
PANEL_ONLY = ("code",)
_START_TAG = re.compile(r"<([a-z]+)([^<>]*)>")
_CLASSES = re.compile(r'class="([^"]*)"')


def escape(value: object) -> str:
    """HTML-escaped text (quotes too, so escaped text can never look like a tag or an attribute)."""
    return html.escape(str(value))


def block(*parts: str, cls: str = "ca-text") -> str:
    """Parts of one section in a ``div`` of the given class (the text class by default)."""
    return f'<div class="{cls}">' + "".join(parts) + "</div>"


def stylesheet() -> str:
    """The scoped ``<style>`` block for the panel: dead accent by default, the alive one under ``ALIVE``."""
    dead, alive = ACCENTS["dead"], ACCENTS["alive"]
    rules = [f".{ROOT}{{{BOX.format(accent=dead)}}}", f".{ROOT}.{ALIVE}{{border-left-color:{alive}}}"]
    for selector, decls in RULES:
        rules.append(f".{ROOT} {selector}{{{decls.format(accent=dead)}}}")
        accented = ";".join(x for x in decls.split(";") if "{accent}" in x)
        if accented:
            rules.append(f".{ROOT}.{ALIVE} {selector}{{{accented.format(accent=alive)}}}")
    return "<style>\n" + "\n".join(rules) + "\n</style>"


def _declarations(tag: str, classes: list[str], accent: str) -> str:
    found = [d for sel, d in RULES if (sel == tag and tag not in PANEL_ONLY) or (sel[:1] == "." and sel[1:] in classes)]
    return ";".join(d.format(accent=accent) for d in found)


def inline(fragment: str, accent: str = ACCENTS["dead"]) -> str:
    """The same fragment with the stylesheet's declarations written onto each element that a rule selects.

    Only our own markup is rewritten: text inside it is escaped (see ``escape``), so it holds no tags.
    """

    def add_style(m: re.Match[str]) -> str:
        tag, attrs = m.group(1), m.group(2)
        classes = _CLASSES.search(attrs)
        decls = _declarations(tag, classes.group(1).split() if classes else [], accent)
        return f'<{tag}{attrs} style="{decls}">' if decls else m.group(0)

    return _START_TAG.sub(add_style, fragment)


def box(cls: str, body: str, accent: str = ACCENTS["dead"]) -> str:
    """A standalone output: ``body`` in the accented box, every style inline (it must survive without ``<style>``)."""
    return f'<div class="{cls}" style="{BOX.format(accent=accent)}">{inline(body, accent)}</div>'
