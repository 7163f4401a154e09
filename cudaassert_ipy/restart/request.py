"""Restart this kernel and have the new one replay the setup: the buttons, ``%cudaassert restart`` and ``setup``.

On the kernel's main thread (a button's click handler and a magic already run there): write the
resume plan and the startup stub, show "Restarting…" on the button, then ``kernel.do_shutdown(True)``.
The kernel exits cleanly and the Jupyter server restarts it with the same id (0.5–3.5 s). It must
not be called from another thread (the kernel would then wait for the next message), and it is
preferred to ``os._exit``, which loses the button's last update. Where nothing restarts the kernel
(VS Code, a terminal, headless runs), the plan is armed and the user is told what to press.
Nothing is shut down unless the plan and the stub were written: a failure costs no data.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.restart import plan_files, startup_stub
from cudaassert_ipy.restart.cell_history import CellHistory, CellRecord, parse_cell_numbers
from cudaassert_ipy.restart.frontend import Frontend, Verdict, check_server
from cudaassert_ipy.restart.plan import (
    AppliedFix,
    DiagnosisSummary,
    FailingCell,
    FrontendKind,
    Mode,
    RestartOutcome,
    ResumePlan,
)
from cudaassert_ipy.restart.plan_files import PlanError
from cudaassert_ipy.view.actions import Action, ReplayChoice

if TYPE_CHECKING:
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis
    from cudaassert_ipy.restart.replay import Resumed

__all__ = [
    "ActionList",
    "Host",
    "RequestError",
    "actions_for",
    "build_plan",
    "plan_listing",
    "request_restart",
    "restart_command",
    "setup_command",
    "setup_listing",
]

Checker = Callable[..., "tuple[Verdict, str]"]


class DeadSince(Protocol):
    """The context state as a restart reads it (the shell's ``ContextState``)."""

    @property
    def dead_since(self) -> Diagnosis | None:  # the Diagnosis that killed the context
        ...


class Host(Protocol):
    """What a restart needs from the loaded extension (the shell layer passes itself)."""

    shell: Any
    history: CellHistory

    @property
    def state(self) -> DeadSince: ...

    last: Diagnosis | None
    resumed: Resumed | None


class RequestError(ValueError):
    """A usage mistake in a restart or setup command; the message says how to fix it (the magic shows it)."""


PLAN_HEADER = "{prefix} Restart {mode_text}; {count} setup cell(s) replay before your next cell:"
PLAN_LINE = "  [{number}] {first_line}  ({duration:.2f} s)"
NO_CELLS = "  (no cells: the kernel restarts empty)"
RESTARTING = (
    "{prefix} Restarting the kernel now; it comes back in a few seconds with the same id. Then run a cell "
    "(the failing one{cell}): the setup replays first, inside that cell."
)
#: what to do next, for each frontend that does not restart its kernel itself (the server does: RESTARTING)
ARMED: dict[FrontendKind, str] = {
    FrontendKind.VSCODE: (
        "{prefix} Plan armed. VS Code does not restart this kernel by itself: press Restart in the notebook "
        "toolbar, then run a cell; the setup replays first, inside that cell."
    ),
    FrontendKind.TERMINAL: (
        "{prefix} Plan armed. This IPython cannot restart itself: exit (Ctrl-D), start `ipython` again in "
        "this directory and terminal, and run a command; the setup replays first."
    ),
    FrontendKind.HEADLESS: (
        "{prefix} This run has no interactive frontend ({detail}), so nothing here can restart the kernel. "
        "The plan is kept for {ttl} min: restart this kernel and run a cell to replay the setup, or re-run "
        "the notebook with CUDA_LAUNCH_BLOCKING=1 and CUDAASSERT_VALIDATORS=1 in its environment."
    ),
    FrontendKind.KERNEL: (
        "{prefix} No Jupyter server was found for this kernel (looked for {detail}), so it cannot restart "
        "itself. The plan is kept for {ttl} min: restart the kernel from your frontend, then run a cell; the "
        "setup replays first, inside that cell."
    ),
}
#: a server that does not know this kernel's id: armed, as if no server were there
SERVER_UNKNOWN = (
    "{prefix} The Jupyter server at {detail} does not know this kernel's id, so it would not restart it. "
    "Nothing was restarted. The plan is kept for {ttl} min: restart the kernel from your frontend, then "
    "run a cell."
)
SERVER_NOTE = {
    "refused": "{prefix} The Jupyter server at {url} refused the token in its runtime file ({why}), so this "
    "kernel's id could not be confirmed; restarting anyway: the server that launched this kernel "
    "restarts it when it exits.",
    "unreachable": "{prefix} The Jupyter server at {url} did not answer ({why}), so this kernel's id could not be "
    "confirmed; restarting anyway: the server that launched this kernel restarts it when it exits.",
}
BUTTON = {
    RestartOutcome.RESTARTING: "Restarting…",
    RestartOutcome.ARMED: "Armed: restart the kernel",
    RestartOutcome.FAILED: "Restart failed",
}
SETUP_HEADER = {
    "pinned": "{prefix} Setup cells a restart replays (your choice, `%cudaassert setup`):",
    "failing": "{prefix} Setup cells a restart replays (default: cells that succeeded before cell [{cell}]):",
    "all": "{prefix} Setup cells a restart replays (default: every cell that succeeded):",
}
SETUP_FOOTER = (
    "Choose with `%cudaassert setup 2,3,5` (or 2-5), back to the default with `%cudaassert setup auto`; "
    "a first line `# cudaassert: setup` forces a cell in, `# cudaassert: skip` keeps it out. "
    "`%cudaassert setup keep 3,4` (or a first line `# cudaassert: keep`) restores those cells' values "
    "instead of replaying them."
)
KEEP_MARK = "  keep"
SETUP_USAGE = "`%cudaassert setup {value}`: give cell numbers like 2,3,5 or 2-5, or `auto`, or `show`."
UNKNOWN_CELLS = "`{what}`: cell(s) {missing} are not in this kernel's history (known: {known})."
CPU_NORMAL = (
    "`--cpu` and `--normal` do not go together: `--normal` restarts without blocking mode and validators; "
    "`--cpu` keeps both and hides the GPU."
)
NO_REPLAY_CELLS = "`--no-replay` and `--cells` do not go together: `--no-replay` replays nothing."


def failing_record(ext: Host) -> CellRecord | None:
    """The cell that killed the context; while the context is alive every successful cell counts as setup."""
    dead = ext.state.dead_since
    return ext.history.failing(dead.cell) if dead is not None else None


def _diagnosis_summary(d: Diagnosis | None) -> DiagnosisSummary | None:
    if d is None:
        return None
    return DiagnosisSummary(d.cause_id, d.title, d.headline, d.specific, d.cell, d.exception_line)


def build_plan(
    ext: Host,
    fe: Frontend,
    mode: Mode,
    cells: Sequence[CellRecord],
    failing_batch: tuple[str, tuple[int, ...]] | None = None,
    fix: AppliedFix | None = None,
) -> ResumePlan:
    failing = failing_record(ext)
    now = time.time()
    return ResumePlan(
        key=fe.key,
        mode=mode,
        cells=tuple(c.as_plan_cell() for c in cells),
        created=now,
        expires=now + plan_files.PLAN_TTL,
        kernel_id=fe.kernel_id,
        notebook=fe.notebook,
        frontend=fe.kind,
        env=tuple(mode.env.items()),
        validators=mode.validators,
        failing=None
        if failing is None
        else FailingCell(failing.number, failing.cell_id, failing.source, failing.error),
        diagnosis=_diagnosis_summary(ext.state.dead_since or ext.last),
        failing_batch=failing_batch,
        fix=fix,
    )


def plan_listing(mode: Mode, cells: Sequence[CellRecord]) -> str:
    lines = [PLAN_HEADER.format(prefix=PREFIX, mode_text=mode.text, count=len(cells))]
    lines += [PLAN_LINE.format(number=c.number, first_line=c.first_line, duration=c.duration) for c in cells]
    return "\n".join(lines if cells else [*lines, NO_CELLS])


def _arm(shell: Any, plan: ResumePlan) -> None:
    """Plan and stub together, under the lock a claiming kernel takes before it removes an idle stub."""
    directory = plan_files.ensure_dir()
    try:
        with plan_files.plan_lock(directory):
            path = plan_files.write_plan(plan, directory)
            try:
                startup_stub.ensure_stub(shell)
            except startup_stub.StubError:
                path.unlink(missing_ok=True)  # without the stub the plan could never run
                raise
    except OSError as e:  # the lock file itself
        raise PlanError(plan_files.PLAN_WRITE_FAILED.format(prefix=PREFIX, directory=directory, error=e)) from e


def _shutdown(shell: Any) -> None:
    """``do_shutdown(True)`` on the main thread; from any other thread, hand it to the kernel's loop."""
    kernel = shell.kernel
    loop = getattr(kernel, "io_loop", None)
    if threading.current_thread() is threading.main_thread() or loop is None:
        kernel.do_shutdown(True)
    else:
        loop.add_callback(kernel.do_shutdown, True)


def _feedback(button: Any, outcome: RestartOutcome, message: str) -> None:
    if button is None:
        print(message)
        return
    button.description = BUTTON[outcome]
    button.tooltip = message
    button.disabled = True


def request_restart(
    ext: Host,
    frontend: Frontend,
    mode: Mode = Mode.DEBUG,
    cells: Sequence[CellRecord] | None = None,
    button: Any = None,
    checker: Checker = check_server,
    keep: bool = True,
    fix: AppliedFix | None = None,
) -> RestartOutcome:
    """Write the plan, then restart (or arm and explain). ``checker`` asks the server about this kernel's id.
    Cells marked keep are saved first (restored instead of replayed); ``keep=False`` replays them all."""
    fe = frontend
    if cells is None:
        cells = ext.history.plan(failing_record(ext))
    from cudaassert_ipy.data.reproduce import plan_entry  # the failing batch's indices, when the bookmark found it

    plan = build_plan(ext, fe, mode, cells, failing_batch=plan_entry(getattr(ext, "samples", None)), fix=fix)
    notes = [plan_listing(mode, cells)]
    outcome = RestartOutcome.RESTARTING if fe.restarts_itself else RestartOutcome.ARMED
    armed: str | None = None  # the words for fe.kind, unless its server does not know this kernel
    if fe.kind is FrontendKind.SERVER and fe.server is not None and fe.kernel_id:
        verdict, why = checker(fe.server, fe.kernel_id)
        if verdict is Verdict.UNKNOWN:
            outcome, armed = RestartOutcome.ARMED, SERVER_UNKNOWN
        elif verdict.value in SERVER_NOTE:
            notes.append(SERVER_NOTE[verdict.value].format(prefix=PREFIX, url=fe.detail, why=why))
    from cudaassert_ipy.restart import keep as keeping  # cloudpickle, only when a restart happens

    kept = keeping.save_for_plan(plan, ext.history.records, ext.history.kept, ext.shell.user_ns) if keep else None
    if kept is not None and kept.report():
        notes.append(kept.report())
    try:
        _arm(ext.shell, plan)
    except (PlanError, startup_stub.StubError) as e:
        keeping.discard(plan.key)
        _feedback(button, RestartOutcome.FAILED, "\n".join([*notes, str(e)]))
        return RestartOutcome.FAILED
    if outcome is RestartOutcome.RESTARTING:
        failing = plan.failing
        cell = f" [{failing.number}]" if failing is not None and failing.number is not None else ""
        notes.append(RESTARTING.format(prefix=PREFIX, cell=cell))
        _feedback(button, outcome, "\n".join(notes))
        _shutdown(ext.shell)
    else:
        words = armed or ARMED[fe.kind]
        notes.append(words.format(prefix=PREFIX, detail=fe.detail, ttl=int(plan_files.PLAN_TTL // 60)))
        _feedback(button, outcome, "\n".join(notes))
    return outcome


# -- the panel's buttons -------------------------------------------------------------------------
def _on_click(
    ext: Host, fe: Frontend, mode: Mode, picks: list[tuple[ReplayChoice, CellRecord]], checker: Checker
) -> Callable[[Any], None]:
    def callback(button: Any) -> None:
        ext.history.kept = {rec.number for choice, rec in picks if choice.keep and rec.number is not None}
        request_restart(ext, fe, mode, [rec for choice, rec in picks if choice.selected], button, checker)

    return callback


class ActionList(list[Action]):
    """The panel's buttons; ``replay_choices`` are its checkboxes, the very objects the buttons read at click."""

    def __init__(self, actions: Sequence[Action] = (), replay_choices: Sequence[ReplayChoice] = ()) -> None:
        super().__init__(actions)
        self.replay_choices = list(replay_choices)


def actions_for(
    ext: Host, diagnosis: Diagnosis | None, frontend: Frontend, checker: Checker = check_server
) -> ActionList:
    """Restart only helps a dead context (or ends the debug mode of a restarted kernel); else no buttons."""
    resumed = ext.resumed.mode if ext.resumed is not None else None
    dead = diagnosis is not None and diagnosis.context_dead
    if not dead and resumed in (None, Mode.NORMAL):
        return ActionList()
    records = ext.history.plan(failing_record(ext))
    picks = [
        (
            ReplayChoice(
                r.number or 0, r.first_line, r.duration, True, r.mark == "keep" or r.number in ext.history.kept
            ),
            r,
        )
        for r in records
    ]
    fe = frontend
    reason = (
        ARMED[FrontendKind.HEADLESS].format(prefix=PREFIX, detail=fe.detail, ttl=int(plan_files.PLAN_TTL // 60))
        if fe.kind is FrontendKind.HEADLESS
        else None
    )
    n = len(picks)
    if dead:
        actions = [
            Action(
                "restart_replay",
                "Restart & replay setup",
                _on_click(ext, fe, Mode.DEBUG, picks, checker),
                reason,
                f"Restart the kernel with CUDA_LAUNCH_BLOCKING=1 and validators on; the {n} ticked setup "
                "cell(s) replay when you run your next cell.",
            ),
            Action(
                "restart_cpu",
                "Restart on CPU",
                _on_click(ext, fe, Mode.CPU, picks, checker),
                reason,
                f"Restart with the GPU hidden (CUDA_VISIBLE_DEVICES=) and validators on; the {n} ticked "
                "setup cell(s) replay on the CPU.",
            ),
        ]
    else:
        actions = [
            Action(
                "restart_normal",
                "Back to normal speed",
                _on_click(ext, fe, Mode.NORMAL, picks, checker),
                reason,
                f"Restart without blocking mode and validators; the {n} ticked setup cell(s) replay.",
            )
        ]
    return ActionList(actions, [choice for choice, _ in picks])


# -- the commands behind the magics: plain inputs, RequestError for a usage mistake ----------------------
def _records_for(ext: Host, text: str, what: str) -> list[CellRecord]:
    try:
        numbers = parse_cell_numbers(text)
    except ValueError:
        raise RequestError(
            SETUP_USAGE.format(value=text)
            if what.startswith("%cudaassert setup")
            else f"`{what}`: give cell numbers like --cells 2,3,5 (the n of In [n])."
        ) from None
    try:
        return ext.history.resolve(numbers)
    except KeyError as e:
        known = ", ".join(map(str, ext.history.known_numbers())) or "none yet"
        raise RequestError(
            UNKNOWN_CELLS.format(what=what, missing=", ".join(map(str, e.args[0])), known=known)
        ) from None


def restart_command(
    ext: Host,
    frontend: Frontend,
    cpu: bool = False,
    normal: bool = False,
    no_replay: bool = False,
    cells: str | None = None,
    no_keep: bool = False,
) -> RestartOutcome:
    """``%cudaassert restart [--cpu] [--normal] [--no-replay] [--cells 2,3,5] [--no-keep]``."""
    if cpu and normal:
        raise RequestError(CPU_NORMAL)
    if no_replay and cells:
        raise RequestError(NO_REPLAY_CELLS)
    records = None
    if no_replay:
        records = []
    elif cells:
        records = _records_for(ext, cells, f"%cudaassert restart --cells {cells}")
    mode = Mode.CPU if cpu else Mode.NORMAL if normal else Mode.DEBUG
    return request_restart(ext, frontend, mode, records, keep=not no_keep)


def setup_listing(ext: Host) -> str:
    history = ext.history
    failing = failing_record(ext)
    if history.pinned is not None:
        header = SETUP_HEADER["pinned"]
    else:
        header = SETUP_HEADER["failing" if failing is not None else "all"]
    cells = history.plan(failing)
    lines = [header.format(prefix=PREFIX, cell=failing.number if failing else "")]
    lines += [
        PLAN_LINE.format(number=c.number, first_line=c.first_line, duration=c.duration)
        + (KEEP_MARK if c.mark == "keep" or c.number in history.kept else "")
        for c in cells
    ]
    return "\n".join([*lines, *([] if cells else ["  (none)"]), SETUP_FOOTER])


def setup_command(ext: Host, value: str | None, numbers: str | None = None) -> str:
    """``%cudaassert setup [show|auto|2,3,5]``: choose the cells a restart replays; returns the listing."""
    if value == "keep":
        ext.history.kept = (
            set()
            if numbers in (None, "none")
            else {r.number for r in _records_for(ext, numbers, f"%cudaassert setup keep {numbers}") if r.number}
        )
    elif value not in (None, "show", "auto"):
        records = _records_for(ext, value, f"%cudaassert setup {value}")
        ext.history.pinned = [r.number for r in records if r.number is not None]
    elif value == "auto":
        ext.history.pinned = None
    return setup_listing(ext)
