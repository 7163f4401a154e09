"""``%cudaassert <verb>`` and ``%%cuda_debug``: thin shells over plain functions.

``%cudaassert?`` prints the manual (every option has help). Misuse raises ``UsageError``
with the fix in its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, magics_class

from cudaassert_ipy.base.passthrough import drop_own_frame
from cudaassert_ipy.shell.debug_cell import debug_magic_arguments, parse_debug_args, run_debug_cell
from cudaassert_ipy.shell.magic_args import argument, cell_magic, line_magic, magic_arguments, parse_argstring

if TYPE_CHECKING:
    from cudaassert_ipy.shell.extension import Extension

__all__ = ["CudaAssertMagics", "status_text", "unregister_magics"]

VERBS = ("status", "explain", "on", "off", "validators", "restart", "setup", "fix")
NO_DIAGNOSIS = "No CUDA failure has been diagnosed in this kernel yet."


def status_text(ext: Extension) -> str:
    """One screen: loaded, context alive or dead, tap state, validators."""
    lines = ["cudaassert: loaded" + ("" if ext.config.enabled else " (reports off: `%cudaassert on`)")]
    if ext.state.dead_since is not None:
        d = ext.state.dead_since
        cell = f"[{d.cell}]" if d.cell is not None else "(unknown)"
        lines.append(f"GPU context: DEAD since cell {cell} ({d.title}); restart the kernel")
    else:
        lines.append("GPU context: alive (no sticky CUDA error seen)")
    if ext.tap is not None:
        lines.append(f"fd tap: on (fds {', '.join(map(str, ext.tap.fds))})")
    else:
        lines.append(f"fd tap: off{' - ' + ext.tap_note if ext.tap_note else ''}")
    from cudaassert_ipy.checks.torch_compat import off_line, status_lines  # no torch import of its own

    compat = status_lines()  # one line per feature this torch cannot support (once torch is imported)
    validators_off = off_line("validators") if compat else None
    lines.append(validators_off or f"validators: {'on' if ext.validators_on() else 'off'} in this thread")
    lines.append(ext.bookmark.status_line() if ext.bookmark is not None else "DataLoader bookmark: off")
    lines.extend(line for line in compat if line != validators_off and not line.startswith("DataLoader bookmark"))
    if ext.resumed is not None:
        lines.append(
            f"restarted by cudaassert: {ext.resumed.mode.value} mode (`%cudaassert restart --normal` for normal speed)"
        )
    return "\n".join(lines)


@magics_class
class CudaAssertMagics(Magics):
    def __init__(self, shell: Any, ext: Extension) -> None:
        super().__init__(shell)
        self.ext = ext

    @magic_arguments()
    @argument(
        "verb",
        choices=VERBS,
        help="status: what is on and whether the GPU context is alive; "
        "explain: show the last diagnosis again; on/off: turn reports on or off; "
        "validators on|off: check risky ops' inputs before they launch.",
    )
    @argument(
        "value", nargs="?", help="for `validators`: on or off; for `setup`: cell numbers (2,3,5), 'auto', or 'show'"
    )
    @argument(
        "numbers",
        nargs="?",
        help="for `setup keep`: the cells whose values a restart keeps instead of replaying them, e.g. 3,4 (or `none`)",
    )
    @argument("--no-keep", action="store_true", help="restart: replay every cell, keep none (see `setup keep`)")
    @argument("--cpu", action="store_true", help="restart: hide the GPU (CUDA_VISIBLE_DEVICES=) and replay on the CPU")
    @argument("--normal", action="store_true", help="restart: back to normal speed (no blocking mode, no validators)")
    @argument("--no-replay", action="store_true", help="restart: restart only, replay no cells")
    @argument("--cells", default=None, help="restart: replay exactly these cells, e.g. --cells 2,3,5")
    @argument(
        "--restart",
        action="store_true",
        help="fix apply: then restart, replay the patched setup with "
        "validators on, and verify (preflight, one step on the failing batch)",
    )
    @argument(
        "--full",
        action="store_true",
        help="fix apply --restart: run the whole failing cell again, not one step on the failing batch",
    )
    @argument(
        "--in-notebook",
        action="store_true",
        help="fix apply: the frontend extension's buttons edit the "
        "notebook's cell too (they pass this; the replay then does not say the notebook holds the old code)",
    )
    @argument(
        "--choose",
        type=int,
        default=None,
        metavar="N",
        help="fix apply: apply alternative N (when the data does not decide)",
    )
    @argument(
        "--log",
        default=None,
        metavar="PATH",
        help="explain: explain the assertions and CUDA errors in a "
        "saved log file instead (a Kaggle, torchrun or SLURM log); pasted text: %%%%cudaassert_explain",
    )
    @line_magic
    def cudaassert(self, line: str) -> None:
        """Control the cudaassert extension."""
        args = parse_argstring(self.cudaassert, line)
        restart_only = [
            o for o in ("cpu", "normal", "no_replay", "cells", "no_keep") if getattr(args, o) not in (False, None)
        ]
        if restart_only and args.verb != "restart":
            raise UsageError(f"--{restart_only[0].replace('_', '-')} only goes with `%cudaassert restart`.")
        fix_only = [o for o in ("restart", "full", "choose", "in_notebook") if getattr(args, o) not in (False, None)]
        if fix_only and not (args.verb == "fix" and args.value == "apply"):
            raise UsageError(f"--{fix_only[0].replace('_', '-')} only goes with `%cudaassert fix apply`.")
        if args.verb == "fix":
            from cudaassert_ipy.shell import fix

            if args.value not in (None, "show", "apply"):
                raise UsageError(
                    f"`%cudaassert fix {args.value}`: say `%cudaassert fix` (show the patch) or "
                    "`%cudaassert fix apply [--restart]`."
                )
            proposed = fix.proposed(self.ext)
            if args.value != "apply":
                fix.show(proposed)
                return
            try:
                fix.apply(self.ext, proposed, args.choose, args.restart, args.full, args.in_notebook)
            except fix.FixError as e:
                raise UsageError(str(e)) from None
            return
        if args.log is not None and args.verb != "explain":
            raise UsageError("--log only goes with `%cudaassert explain`, e.g. `%cudaassert explain --log train.log`.")
        if args.verb in ("restart", "setup"):
            from cudaassert_ipy.restart import request as restart
            from cudaassert_ipy.restart.frontend import detect

            try:
                if args.verb == "restart":
                    restart.restart_command(
                        self.ext,
                        detect(self.shell),
                        cpu=args.cpu,
                        normal=args.normal,
                        no_replay=args.no_replay,
                        cells=args.cells,
                        no_keep=args.no_keep,
                    )
                else:
                    print(restart.setup_command(self.ext, args.value, args.numbers))
            except restart.RequestError as e:
                raise UsageError(str(e)) from None
            return
        if args.verb == "validators" and args.value not in (None, "on", "off"):
            raise UsageError(f"`%cudaassert validators {args.value}`: say `on` or `off`.")
        if args.verb != "validators" and args.value is not None:
            raise UsageError(
                f"`%cudaassert {args.verb}` takes no value; did you mean `%cudaassert validators {args.value}`?"
            )
        if args.verb == "status":
            print(status_text(self.ext))
        elif args.verb == "explain" and args.log is not None:
            from cudaassert_ipy.logs.cli import LogUnreadable, explain_for_magic

            try:
                print(explain_for_magic(args.log))
            except LogUnreadable as e:
                raise UsageError(str(e)) from None
        elif args.verb == "explain":
            if self.ext.last is None:
                print(NO_DIAGNOSIS)
            else:
                self.ext.show(self.ext.last)
        elif args.verb in ("on", "off"):
            self.ext.config.enabled = args.verb == "on"
            print(f"cudaassert reports are {args.verb}.")
        elif args.verb == "validators":
            if args.value is None:
                raise UsageError("Say which: `%cudaassert validators on` or `%cudaassert validators off`.")
            self.ext.set_validators(args.value == "on")
            if args.value == "on" and not self.ext.validators_on():  # this torch cannot: enable said why
                return
            print(f"cudaassert validators are {args.value} (in this thread).")

    @cell_magic
    def cudaassert_explain(self, line: str, cell: str) -> None:
        """Explain pasted text: every kernel assertion and CUDA error in the cell's text (a log copied from a
        forum, an issue or a notebook), grouped by rank; markdown damage is read through."""
        if line.strip():
            raise UsageError("%%cudaassert_explain takes no options: paste the log text into the cell below it.")
        if not cell.strip():
            raise UsageError("Paste the log text into the cell, under the %%cudaassert_explain line.")
        from cudaassert_ipy.logs.cli import explain_pasted

        print(explain_pasted(cell))

    @debug_magic_arguments  # --sync / --nan with help=, so `%%cuda_debug?` is the manual
    @cell_magic
    def cuda_debug(self, line: str, cell: str) -> None:
        """Run this cell with validators on; --sync: synchronise after each CUDA torch call; --nan: stop at the
        first NaN/inf."""
        __tracebackhide__ = True
        options = parse_debug_args(line)  # UsageError with the usage line on bad input
        try:
            run_debug_cell(self.shell, cell, sync=options.sync, nan=options.nan)
        except BaseException as passing:  # the cell's own error: no frame of ours above it (see passthrough)
            drop_own_frame(passing)
            raise


def unregister_magics(shell: Any, magics: Magics) -> None:
    """IPython has no public unregister; remove exactly the names this instance registered."""
    manager = shell.magics_manager
    for kind, names in magics.magics.items():
        table = manager.magics.get(kind, {})
        for name in names:
            bound = table.get(name)
            if getattr(bound, "__self__", None) is magics:
                del table[name]
    for key, value in list(manager.registry.items()):
        if value is magics:
            del manager.registry[key]
    shell.configurables[:] = [c for c in shell.configurables if c is not magics]  # register_magics added it
