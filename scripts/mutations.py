"""Mutation check, outside CI: small deliberate bugs, each of which the tests named for it must catch.

    .venv/bin/python scripts/mutations.py              # every mutation
    .venv/bin/python scripts/mutations.py idle vmap    # those whose name contains a word given

Each mutation replaces one exact piece of text in one file, runs the tests named for it (pytest -x), and puts
the file back (also on Ctrl-C). "caught" means some test failed; a mutation the tests let through is
"SURVIVED" and the script exits 1. A mutation made for Python 3.10 runs in .venv-py310-t24 (scripts/test.sh's
compat environment) and is skipped where that is not built. Run it on a clean checkout: it edits files in place.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY310 = ROOT / ".venv-py310-t24" / "bin" / "python"


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    python: Path | None = None  # None: this interpreter


HINTS = "cudaassert_ipy/diagnose/hints.py"
MASK = '"targets look like 0..255 mask pixels: divide by 255 or binarise with (mask > 0).float()"'
MULTI = '"for integer class labels with more than two classes use CrossEntropyLoss instead"'
MUTATIONS = [
    Mutation(
        "nearest resize advises bilinear",
        HINTS,
        '"resize label masks with nearest-neighbour interpolation only (bilinear invents labels)"',
        '"resize label masks with bilinear interpolation only (nearest invents labels)"',
        ("tests/test_hints_words.py", "tests/test_hints_templates.py"),
    ),
    Mutation(
        "BCE NaN target says lower the learning rate",
        HINTS,
        '"the target holds NaN: check how the labels are built"',
        '"the target holds NaN: lower the learning rate"',
        ("tests/test_hints_words.py", "tests/test_hints_templates.py"),
    ),
    Mutation(
        "two hint templates swapped (mask pixels / multiclass)",
        HINTS,
        f"BCE_MASK_PIXELS = {MASK}\nBCE_MULTICLASS = {MULTI}",
        f"BCE_MASK_PIXELS = {MULTI}\nBCE_MULTICLASS = {MASK}",
        ("tests/test_hints_words.py",),
    ),
    Mutation(
        "a cause given another cause's words (BCE input reads as BCE target)",
        "cudaassert_ipy/diagnose/causes/texts.py",
        '"bce_input_out_of_range": _BCE_IN,',
        '"bce_input_out_of_range": _BCE_TG,',
        ("tests/test_hints_words.py",),
    ),
    Mutation(
        "class-label validator's bound inverted (label == C let through)",
        "cudaassert_ipy/checks/losses.py",
        "    if lo >= 0 and hi < n_classes:\n        return None",
        "    if lo >= 0 and hi <= n_classes:\n        return None",
        ("tests/test_checks_losses.py",),
    ),
    Mutation(
        "embedding validator's bound inverted (id == num let through)",
        "cudaassert_ipy/checks/embedding.py",
        "    if lo >= 0 and hi < num:\n",
        "    if lo >= 0 and hi <= num:\n",
        ("tests/test_checks_embedding.py",),
    ),
    Mutation(
        "fd tap's stop() waits for 0.3 s of quiet",
        "cudaassert_ipy/capture/fd_tap.py",
        "_IDLE_S = 0.05",
        "_IDLE_S = 0.3",
        ("tests/test_fd_tap.py::test_a_child_process_holding_the_pipe_after_stop_keeps_its_output_and_its_life",),
    ),
    Mutation(
        "fd tap's stop() waits for a child's output to end",
        "cudaassert_ipy/capture/fd_tap.py",
        "held = self._finish(self._channels, time.monotonic() + _STOP_TIMEOUT_S, _IDLE_S)",
        "held = self._finish(self._channels, time.monotonic() + _STOP_TIMEOUT_S, None)",
        ("tests/test_fd_tap.py::test_a_child_process_holding_the_pipe_after_stop_keeps_its_output_and_its_life",),
    ),
    Mutation(
        "validators read vmap-wrapped tensors",
        "cudaassert_ipy/checks/common.py",
        "        and not _is_functorch_wrapped(tensor)\n",
        "",
        ("tests/test_checks_mode.py::test_vmap_wrapped_tensors_are_skipped_without_crashing",),
    ),
    Mutation(
        "%cudaassert on cannot undo off",
        "cudaassert_ipy/shell/magics.py",
        'self.ext.config.enabled = args.verb == "on"',
        'self.ext.config.enabled = self.ext.config.enabled and args.verb == "on"',
        ("tests/test_report_inprocess.py",),
    ),
    Mutation(
        "the wrappers' frame dropper crashes (Python 3.10: strict xfails)",
        "cudaassert_ipy/base/passthrough.py",
        "error.__traceback__ = tb.tb_next\n",
        "error.__traceback__ = tb.tb_next.tb_mutated\n",
        (
            "tests/test_passthrough.py::test_a_wrapper_that_drops_its_frame_leaves_the_traceback_it_would_have_without_it",
            "tests/test_checks_mode_closure.py::test_an_ordinary_error_in_a_checked_closure_shows_no_frame_of_ours",
        ),
        python=PY310,
    ),
]


def run(mutation: Mutation) -> str:
    python = mutation.python or Path(sys.executable)
    if not python.exists():
        return f"not run ({python.relative_to(ROOT)} is not built)"
    path = ROOT / mutation.file
    original = path.read_text(encoding="utf-8")
    if original.count(mutation.old) != 1:
        return "BROKEN (the text to replace is not there exactly once: update this script)"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        str(python),
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "not browser and not frameworks",
        *mutation.tests,
    ]
    try:
        path.write_text(original.replace(mutation.old, mutation.new), encoding="utf-8")
        result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    finally:
        path.write_text(original, encoding="utf-8")
    failed = [line for line in result.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    if result.returncode == 0:
        return "SURVIVED"
    return "caught by " + (failed[0].split(" - ")[0].split(" ", 1)[1] if failed else f"pytest exit {result.returncode}")


def main(words: list[str]) -> int:
    chosen = [m for m in MUTATIONS if not words or any(w.lower() in m.name.lower() for w in words)]
    survived = 0
    for mutation in chosen:
        start = time.monotonic()
        verdict = run(mutation)
        survived += verdict == "SURVIVED"
        print(f"{mutation.name}: {verdict} ({time.monotonic() - start:.0f} s)", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
