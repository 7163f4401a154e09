"""Honest when unsure: the likely causes ranked from the user's own code lines, when nothing else decides.

A report with no kernel assertion line, no failure point in a framework's frames and no host facts still often
shows the lines the user wrote: ``loss = criterion(out, y)``, ``out = model(input_ids)``, ``x[idx]``,
``torch.multinomial(probs, 1)``. A person reading it ranks the likely causes from the operation the line calls
(a loss: class labels first; a model given token ids: the embedding's size first). The rules are data
(``causes/code_lines.json``: a pattern over the printed line, what the line calls, and the ranked causes, each
with the key of what to check in :data:`cudaassert_ipy.diagnose.hints.CODE_CHECKS`); this module only matches.

A line that only used an earlier result (``loss.item()``, ``label.cuda()``) says where the failure surfaced, not
where it ran: its rule says what ran before it. The innermost user line with a rule wins; a line that ran the op
beats one where it only surfaced. A frame whose line no rule reads may still name its op by its function
(``def focal_loss``); when no user line is read, an installed package's lines are (its loss, its model's lookup),
never PyTorch's own module calls, and never a package's line that only used a result. Last, a rule with a
``text`` pattern reads a line of the text itself: a size printed with the error (``num_classes: 6``, a model's
``Embedding(8000, 256)``, ``cat_dims``) says what the failing index was likely checked against.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from cudaassert_ipy.capture.tracebacks import Frame

__all__ = ["TEXT_WHERE", "CodeRule", "Ranking", "is_user_frame", "rank", "rank_text", "rules"]

#: Paths of code the user did not write: installed packages, the standard library, PyTorch itself.
_LIBRARY = re.compile(
    r"site-packages/|dist-packages/|/lib/python\d|/lib64/python\d|<frozen |^<string>|"
    r"/torch/(?:nn|autograd|_tensor|tensor|functional|_utils|cuda)|\\Lib\\|/Lib/"
)


@dataclass(frozen=True)
class CodeRule:
    """One operation a user's line may call, and the causes it makes likely, most likely first."""

    id: str
    op: str  # what the line calls, in words: "a loss"
    code: str  # a pattern searched in the printed line
    ranked: tuple[tuple[str, str], ...]  # (cause id, key of hints.CODE_CHECKS)
    late: bool = False  # the line only used a result: the failure ran before it
    func: str = ""  # a pattern over the frame's function name, read when no rule reads the line (``focal_loss``)
    text: str = ""  # instead of ``code``: a pattern over the text's lines (a printed config's class count)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.code)

    @cached_property
    def func_pattern(self) -> re.Pattern[str] | None:
        return re.compile(self.func) if self.func else None

    @cached_property
    def text_pattern(self) -> re.Pattern[str] | None:
        return re.compile(self.text) if self.text else None


@dataclass(frozen=True)
class Ranking:
    """The likely causes one user line makes likely, the line, and the rule that read it."""

    rule: CodeRule
    frame: Frame

    @property
    def causes(self) -> tuple[str, ...]:
        return tuple(cause for cause, _ in self.rule.ranked)

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(check for _, check in self.rule.ranked)

    @property
    def where(self) -> str:
        """``train.py:41``: the line as a person would cite it."""
        name = self.frame.norm_path.rsplit("/", 1)[-1] or "the traceback"
        return f"{name}:{self.frame.line}" if self.frame.line else name


#: PyTorch's own frames: the module call, the autograd engine; they run whatever the user's model asked for.
_TORCH = re.compile(r"/torch/")


def _rule(entry: dict[str, object]) -> CodeRule:
    ranked = entry.get("ranked") or ()
    pairs = tuple(tuple(str(item).split(":", 1)) for item in ranked) if isinstance(ranked, list) else ()
    return CodeRule(
        id=str(entry["id"]),
        op=str(entry["op"]),
        code=str(entry.get("code") or ""),
        ranked=tuple((p[0], p[1]) for p in pairs if len(p) == 2),
        late=bool(entry.get("late")),
        func=str(entry.get("func") or ""),
        text=str(entry.get("text") or ""),
    )


@lru_cache(maxsize=1)
def rules() -> tuple[CodeRule, ...]:
    """The rules, loaded on the first report that needs them."""
    raw = json.loads((Path(__file__).parent / "causes" / "code_lines.json").read_text(encoding="utf-8"))
    return tuple(_rule(e) for e in raw)


def is_user_frame(frame: Frame) -> bool:
    """A line the user wrote: a cell, a script, the user's own package; not an installed library's."""
    return bool(frame.code) and _LIBRARY.search(frame.norm_path) is None


def _is_package_frame(frame: Frame) -> bool:
    """A line of an installed package other than PyTorch itself (whose module calls run what the model asked)."""
    return bool(frame.code) and not is_user_frame(frame) and _TORCH.search(frame.norm_path) is None


def rank(frames: Sequence[Frame], catalogue: Sequence[CodeRule] | None = None, library: bool = False) -> Ranking | None:
    """The ranking of the innermost user line a rule reads, in the first traceback printed (an op that ran beats a
    line where the failure only surfaced). None when no user line calls anything a rule knows.

    ``library``: read the other frames instead (an installed package's loss or model code, not torch's own), for a
    traceback whose user lines call nothing a rule knows; a line there that only used a result (a trainer's
    ``loss.backward()``) says nothing of the user's model, so only lines that ran an op count."""
    first = min((f.block for f in frames), default=0)
    chosen_rules = [r for r in (rules() if catalogue is None else catalogue) if not r.text]
    own = [f for f in frames if f.block == first and (_is_package_frame(f) if library else is_user_frame(f))]
    found: list[Ranking] = []
    for frame in reversed(own):  # innermost first
        rule = next((r for r in chosen_rules if r.pattern.search(frame.code)), None)
        name = frame.func.rsplit(".", 1)[-1]
        rule = rule or next((r for r in chosen_rules if r.func_pattern and r.func_pattern.search(name)), None)
        if rule is not None and not (library and rule.late):
            found.append(Ranking(rule, frame))
    ran = [r for r in found if not r.rule.late]
    chosen = ran or found
    return chosen[0] if chosen else None


#: Where a ranking read from the text's own lines (not a frame) is said to be.
TEXT_WHERE = "the text"


def rank_text(text: str, catalogue: Sequence[CodeRule] | None = None) -> Ranking | None:
    """The ranking a line of the text itself reads (a printed config's ``num_classes: 4``, a model's
    ``Embedding(5000, 64)``), for a text whose frames no rule reads; the first rule that finds a line wins, on the
    last line it finds (a printed model ends with its head: its last ``out_features`` is the class count)."""
    for rule in rules() if catalogue is None else catalogue:
        found = list(rule.text_pattern.finditer(text)) if rule.text_pattern is not None else []
        m = found[-1] if found else None
        if m is not None:  # the line it is on, cut to a readable length around it
            start = max(text.rfind("\n", 0, m.start()) + 1, m.start() - 80)
            end = text.find("\n", m.end())
            line = text[start : min(end if end >= 0 else len(text), m.end() + 80)]
            return Ranking(rule, Frame(TEXT_WHERE, 0, "", line.strip()))
    return None
