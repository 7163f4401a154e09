"""Rule for a class label out of range read from a pasted log that prints the model's label settings.

A log of a Hugging Face style run often prints how many labels the head was built for (``num_labels=14``, a
script's ``Num labels 14``, a config's ``"id2label": {...}``). With no live objects to read, that count is the
best fact there is: a label failed its check against the head's size, so the labels and ``num_labels`` /
``id2label`` disagree. Only for a pasted text (the live post-mortem reads the head itself).
"""

from __future__ import annotations

import re

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding

__all__ = ["printed_labels"]

#: the knob's own name (a config, a call's keywords, an argparse Namespace) or a Hugging Face example script's log
_COUNT = re.compile(r"\bnum_labels[\"']?\s*[:=]\s*(?P<n>\d+)\b|\bNum labels\s*[:=]?\s*(?P<m>\d+)\b")
_ID2LABEL = re.compile(r"[\"']?\b(?:id2label)[\"']?\s*[:=]\s*\{(?P<body>[^{}]{0,20000})\}")
_ENTRY = re.compile(r"[\"']?\d+[\"']?\s*:")
_SEARCHED = 200_000  # characters of a paste read for the settings
PRINTED = (
    "The text prints the label settings of the model's head ({settings}): a label failed its check against the "
    "head's number of classes, so the labels and num_labels / id2label disagree (a label >= num_labels, or a "
    "head built from another config than the label list)."
)
VALUE = "The error names the label {value}."


def _settings(text: str) -> list[str]:
    out = [f"num_labels={m.group('n') or m.group('m')}" for m in _COUNT.finditer(text)][:1]
    for m in _ID2LABEL.finditer(text):
        n = len(_ENTRY.findall(m.group("body")))
        if n:
            out.append(f"id2label with {n} entries")
            break
    return out


def printed_labels(case: Case) -> Finding | None:
    """A label check failed in a pasted log that prints num_labels / id2label: the fix in those words."""
    ev = case.ev
    if not ev.pasted or ev.call is not None or ev.linears or ev.head is not None:
        return None  # a live post-mortem reads the head itself (class_labels)
    settings = _settings(ev.pasted[:_SEARCHED])
    if not settings:
        return None
    f = Finding(op="cross_entropy")
    if case.value is not None:
        f.sentences.append(VALUE.format(value=case.value))
    f.sentences.append(PRINTED.format(settings=", ".join(settings)))
    f.facts.append(("printed", ", ".join(settings)))
    f.fix = hints.frame_fix("hf_num_labels")
    return f
