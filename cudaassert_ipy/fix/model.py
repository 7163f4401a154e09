"""The frozen values the fix layer hands out: a cell as the history knew it, a patch, and a proposed fix.

Standard library only, so that the view and the runner can read a ``ProposedFix`` without LibCST.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DECISION", "NONE", "PATCH_MIME", "SAFE", "Alternative", "CellSource", "LabelSurvey", "Patch", "ProposedFix"]

SAFE = "safe"  # one meaning only: applying it cannot change what the author meant
DECISION = "decision"  # it changes the label space or the data: the user chooses
NONE = "none"  # no edit could be derived (``ProposedFix.why`` says why)

#: The MIME type of the apply request a frontend extension consumes (docs/architecture.md, "Patches").
PATCH_MIME = "application/vnd.cudaassert.patch+json"


@dataclass(frozen=True)
class CellSource:
    """One executed cell, as the kernel's history recorded it (oldest first in a history)."""

    number: int | None  # In [n]
    cell_id: str | None
    source: str
    ok: bool = True
    path: str | None = None  # a script file (the runner): the patch is a file patch against it


@dataclass(frozen=True)
class LabelSurvey:
    """What a scan of the whole training set says about its labels (the data's evidence for a decision)."""

    source: str  # the dataset's name as the user knows it: "train_ds"
    n_samples: int
    counts: tuple[tuple[int, int], ...]  # (label value, samples holding it), every value seen
    bad_rows: tuple[int, ...]  # dataset indices holding labels outside 0..C-1 (ignore_index excepted)
    has_select: bool = False  # a Hugging Face dataset (``.select``) rather than a torch Dataset
    row_names: tuple[str, ...] = ()  # each bad row by name, where rows are not dataset indices ("b.txt line 2")

    def count(self, value: int) -> int:
        return dict(self.counts).get(value, 0)


@dataclass(frozen=True)
class Patch:
    """A change of one cell (or one file): the old and the new code, and why this cell."""

    number: int | None
    cell_id: str | None
    old_source: str
    new_source: str
    diff: str  # unified diff, old -> new
    why_cell: str  # "cell [5] built `model.head` (nn.Linear(32, num_classes))"
    path: str | None = None  # a file patch (a script, a data YAML)

    def request(self) -> dict[str, Any]:
        """The apply request a frontend extension consumes (``PATCH_MIME``, ``"kind": "applied"``)."""
        return {
            "cell_id": self.cell_id,
            "diff": self.diff,
            "execution_count": self.number,
            "kind": "applied",
            "new_source": self.new_source,
            "old_source": self.old_source,
            "path": self.path,
            "version": 1,
        }


@dataclass(frozen=True)
class Alternative:
    """One way to fix the failure, with the data's evidence for it, and its patch when one can be derived."""

    key: str  # "widen_head", "ignore_index", "drop_rows", "shift_labels", "bce_logits", "resize_embeddings"
    title: str  # in the framework's words (diagnose/hints.py)
    evidence: str = ""
    patch: Patch | None = None
    no_patch: str = ""  # why this alternative has no patch
    # the facts after applying it, for the verification's preflight (None: the fix's own)
    num_classes: int | None = None
    ignore_index: int | None = None


@dataclass(frozen=True)
class ProposedFix:
    """What ``cudaassert_ipy.proposed_fix()`` returns: the alternatives, ranked, and the one to apply, if any."""

    safety: str  # SAFE, DECISION or NONE
    alternatives: tuple[Alternative, ...] = ()
    default: int | None = None  # index of the alternative the data decides for (None: the user chooses)
    why: str = ""  # why this ranking; for NONE, why nothing is proposed (one line)
    culprit: str = ""  # "model.head", "criterion"
    # what a verification after the replay checks (plain values: the restart carries them in its plan)
    dataset: str | None = None
    num_classes: int | None = None
    ignore_index: int | None = None
    vocab_size: int | None = None

    def proposal(self) -> dict[str, Any]:
        """The proposal a frontend extension shows with its Apply buttons (``PATCH_MIME``, ``"kind": "proposal"``):
        each alternative by its ``--choose`` number, with its patch's request where it has one."""
        alts = [
            {
                "choose": i,
                "default": self.default == i - 1,
                "evidence": a.evidence,
                "no_patch": a.no_patch,
                "patch": a.patch.request() if a.patch is not None else None,
                "title": a.title,
            }
            for i, a in enumerate(self.alternatives, 1)
        ]
        return {
            "alternatives": alts,
            "culprit": self.culprit,
            "kind": "proposal",
            "safety": self.safety,
            "version": 1,
            "why": self.why,
        }

    @property
    def chosen(self) -> Alternative | None:
        return self.alternatives[self.default] if self.default is not None else None

    @property
    def patch(self) -> Patch | None:
        chosen = self.chosen
        return chosen.patch if chosen is not None else None

    # the patch's fields, for the text forms (`proposed_fix().diff`)
    @property
    def execution_count(self) -> int | None:
        return self.patch.number if self.patch else None

    @property
    def cell_id(self) -> str | None:
        return self.patch.cell_id if self.patch else None

    @property
    def old_source(self) -> str | None:
        return self.patch.old_source if self.patch else None

    @property
    def new_source(self) -> str | None:
        return self.patch.new_source if self.patch else None

    @property
    def diff(self) -> str | None:
        return self.patch.diff if self.patch else None
