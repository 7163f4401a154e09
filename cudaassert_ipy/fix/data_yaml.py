"""A data YAML's ``nc:`` (and its ``names:``) set to a new class count, as a text edit of the file.

Ultralytics reads a detection model's class count from the data YAML the trainer was given, so no cell
holds it: the patch is a file patch. Edited as text, line by line (standard library only; no YAML
parser, so the user's comments, order and quoting stay as they were). Forms understood: ``nc: 3``;
``names:`` as a block list (``- cat``), a block mapping (``0: cat``) or a flow list (``[cat, dog]``),
extended with placeholder names (``hints.PATCH_CODE["yaml_name"]``). Any other form: no patch.

The data's evidence comes from the same file: how many ``names:`` it lists, and the class id of every box
in the training set's label files (``train:`` under ``path:``; Ultralytics finds an image's label file by
turning its last ``/images/`` into ``/labels/`` and its extension into ``.txt``).
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.fix.model import LabelSurvey

__all__ = ["label_survey", "names_count", "set_nc"]

_MAX_BYTES = 1 << 20  # a data YAML is a few lines; a bigger one is not read
_KEY = re.compile(r"^(nc|names)\s*:(.*)$")
_ITEM = re.compile(r"^(\s+)-\s")
_ENTRY = re.compile(r"^(\s+)(\d+)\s*:")
_NC_VALUE = re.compile(r"^(nc\s*:\s*)(\d+)")


def read(path: str) -> str | None:
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


def _flow(value: str, have: int, n: int) -> str | None:
    """``[a, b]`` (a comment may follow) with placeholder names up to ``n``; None when not a one-line list."""
    raw, sep, comment = value.partition("#")
    body = raw.rstrip()
    if not (body.strip().startswith("[") and body.endswith("]")):
        return None
    inner = body[:-1].rstrip()
    extra = ", ".join(_name(i) for i in range(have, n))
    joined = f"{inner}, {extra}]" if inner.strip() != "[" else f"{inner}{extra}]"
    return joined + (raw[len(body) :] + sep + comment if sep else "")


def set_nc(text: str, n: int) -> str | None:
    """``text`` with ``nc: n`` and ``names`` extended to ``n`` entries; None when its form is not understood,
    or it already says ``n``."""
    lines = text.splitlines(keepends=True)
    nc_at: int | None = None
    names_at: int | None = None
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
                out[names_at] = head.split(":", 1)[0] + ":" + new + lines[names_at][len(head) :]
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
        out[nc_at] = hints.PATCH_CODE["yaml_nc"].format(n=n) + lines[nc_at][m.end(2) :]
    for at, added in sorted(inserts, reverse=True):
        out[at:at] = added
    new_text = "".join(out)
    return new_text if new_text != text else None


# -- the data's evidence: the names the YAML lists, the class ids its label files hold ----------------------------
_IMAGE_EXTENSIONS = (".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png", ".tif", ".tiff", ".webp", ".pfm", ".heic")
_MAX_LABEL_FILES = 200_000
_SCALAR = re.compile(r"^(path|train)\s*:\s*(.*?)\s*$")


def names_count(text: str) -> int | None:
    """How many class names ``names:`` lists (a flow list, a block list or a block mapping); None when absent."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _KEY.match(line)
        if m is None or m.group(1) != "names":
            continue
        value = m.group(2).partition("#")[0].strip()
        if value.startswith("[") and value.endswith("]"):
            return len([x for x in value[1:-1].split(",") if x.strip()])
        if value:
            return None
        n = 0
        for inner in lines[i + 1 :]:
            if inner.strip() == "" or inner.lstrip().startswith("#"):
                continue
            if inner[:1] not in (" ", "\t"):
                break
            n += bool(_ITEM.match(inner) or _ENTRY.match(inner))
        return n
    return None


def _scalar(text: str, key: str) -> str | None:
    for line in text.splitlines():
        m = _SCALAR.match(line)
        if m is not None and m.group(1) == key:
            value = m.group(2).partition(" #")[0].strip().strip("'\"")
            return value or None
    return None


def _images(train: str) -> list[str]:
    """The training images: a folder's image files, or the lines of a ``.txt`` list (relative to its folder)."""
    if os.path.isdir(train):
        found = []
        for folder, _, files in os.walk(train):
            found += [os.path.join(folder, f) for f in files if f.lower().endswith(_IMAGE_EXTENSIONS)]
            if len(found) > _MAX_LABEL_FILES:
                break
        return sorted(found)
    if train.endswith(".txt") and os.path.isfile(train):
        with open(train, encoding="utf-8") as fp:
            base = os.path.dirname(train)
            return [
                os.path.join(base, x.strip()[2:]) if x.strip().startswith("./") else x.strip() for x in fp if x.strip()
            ]
    return []


def _label_file(image: str) -> str:
    images, labels = f"{os.sep}images{os.sep}", f"{os.sep}labels{os.sep}"
    return labels.join(image.rsplit(images, 1)).rsplit(".", 1)[0] + ".txt"


def label_survey(path: str, nc: int, budget_s: float = 2.0) -> LabelSurvey | None:
    """Every box's class id in the label files of the data YAML's training set: the data's evidence for the
    decision (a class of its own, a few stray lines, 1-based ids). None when the set cannot be found or read
    within ``budget_s`` (no evidence rather than a partial one)."""
    text = read(path)
    if text is None:
        return None
    here = os.path.dirname(os.path.abspath(path))
    root = _scalar(text, "path")
    if root is None:
        root = here
    else:  # an absolute path stays itself; a relative one next to the YAML, else from the working directory
        root = next(
            (r for r in (os.path.join(here, root), os.path.abspath(root)) if os.path.isdir(r)), os.path.join(here, root)
        )
    root = os.path.normpath(root)
    train = _scalar(text, "train")
    if train is None or train.startswith("["):
        return None
    deadline = time.monotonic() + budget_s
    counts: Counter[int] = Counter()
    bad: list[int] = []
    names: list[str] = []
    n = 0
    files = 0
    for image in _images(os.path.join(root, train)):
        if time.monotonic() > deadline:
            return None
        label = _label_file(image)
        try:
            with open(label, encoding="utf-8") as fp:
                lines = fp.read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue  # an image without labels (a background image)
        files += 1
        for k, line in enumerate(lines, 1):
            first = line.split(None, 1)[0] if line.strip() else ""
            try:
                class_id = int(float(first))
            except ValueError:
                continue
            counts[class_id] += 1
            if not 0 <= class_id < nc:
                bad.append(n)
                names.append(f"{os.path.relpath(label, root)} line {k}")  # relative to the dataset's path
            n += 1
    if not files:
        return None
    return LabelSurvey(
        os.path.normpath(os.path.join(root, train)),
        n,
        tuple(sorted(counts.items())),
        tuple(bad),
        row_names=tuple(names),
    )
