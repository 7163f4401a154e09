"""A data YAML's ``nc:`` (and its ``names:``) set to a new class count, as a text edit of the file.

Ultralytics reads a detection model's class count from the data YAML the trainer was given, so no cell
holds it: the patch is a file patch. Edited as text, line by line (standard library only; no YAML
parser, so the user's comments, order and quoting stay as they were). Forms understood: ``nc: 3``;
``names:`` as a block list (``- cat``), a block mapping (``0: cat``) or a flow list (``[cat, dog]``),
extended with placeholder names (``hints.PATCH_CODE["yaml_name"]``). Any other form: no patch.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from cudaassert_ipy.diagnose import hints

__all__ = ["set_nc"]

_MAX_BYTES = 1 << 20  # a data YAML is a few lines; a bigger one is not read
_KEY = re.compile(r"^(nc|names)\s*:(.*)$")
_ITEM = re.compile(r"^(\s+)-\s")
_ENTRY = re.compile(r"^(\s+)(\d+)\s*:")
_NC_VALUE = re.compile(r"^(nc\s*:\s*)(\d+)")


def read(path: str) -> Optional[str]:
    """The file's text, or None when it cannot be read (or is too big to be a data YAML)."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as fp:
            return fp.read()
    except (OSError, UnicodeDecodeError):
        return None


def _name(i: int) -> str:
    return hints.PATCH_CODE["yaml_name"].format(i=i)


def _flow(value: str, have: int, n: int) -> Optional[str]:
    """``[a, b]`` (a comment may follow) with placeholder names up to ``n``; None when not a one-line list."""
    raw, sep, comment = value.partition("#")
    body = raw.rstrip()
    if not (body.strip().startswith("[") and body.endswith("]")):
        return None
    inner = body[:-1].rstrip()
    extra = ", ".join(_name(i) for i in range(have, n))
    joined = f"{inner}, {extra}]" if inner.strip() != "[" else f"{inner}{extra}]"
    return joined + (raw[len(body):] + sep + comment if sep else "")


def set_nc(text: str, n: int) -> Optional[str]:
    """``text`` with ``nc: n`` and ``names`` extended to ``n`` entries; None when its form is not understood,
    or it already says ``n``."""
    lines = text.splitlines(keepends=True)
    nc_at: Optional[int] = None
    names_at: Optional[int] = None
    for i, line in enumerate(lines):
        m = _KEY.match(line)
        if m is not None:
            if m.group(1) == "nc":
                nc_at = i
            else:
                names_at = i
    if nc_at is None and names_at is None:
        return None
    out = list(lines)
    inserts: list[tuple[int, list[str]]] = []
    if names_at is not None:
        head = lines[names_at].rstrip("\r\n")
        value = head.split(":", 1)[1]
        if value.strip() and not value.strip().startswith("#"):
            items = [x for x in value.partition("#")[0].strip()[1:-1].split(",") if x.strip()]
            new = _flow(value, len(items), n)
            if new is None:
                return None
            if len(items) < n:
                out[names_at] = head.split(":", 1)[0] + ":" + new + lines[names_at][len(head):]
        else:
            end = names_at + 1
            block: list[re.Match[str]] = []
            while end < len(lines) and (lines[end].strip() == "" or lines[end][:1] in (" ", "\t")):
                m = _ITEM.match(lines[end]) or _ENTRY.match(lines[end])
                if m is not None:
                    block.append(m)
                    last = end
                end += 1
            if not block:
                return None
            indent = block[-1].group(1)
            eol = "\r\n" if lines[last].endswith("\r\n") else "\n"
            if not lines[last].endswith(("\n", "\r")):
                out[last] = lines[last] + eol
            if block[-1].re is _ITEM:
                added = [f"{indent}- {_name(i)}{eol}" for i in range(len(block), n)]
            else:
                added = [f"{indent}{i}: {_name(i)}{eol}" for i in range(len(block), n)]
            inserts.append((last + 1, added))
    if nc_at is not None:
        m = _NC_VALUE.match(lines[nc_at])
        if m is None:
            return None
        out[nc_at] = hints.PATCH_CODE["yaml_nc"].format(n=n) + lines[nc_at][m.end(2):]
    for at, added in sorted(inserts, reverse=True):
        out[at:at] = added
    new_text = "".join(out)
    return new_text if new_text != text else None
