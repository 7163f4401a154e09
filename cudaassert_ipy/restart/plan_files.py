"""The resume plan on disk: written by the kernel that restarts, claimed once by the kernel that comes back.

A plan holds code that will run, so it lives in a per-user directory (``<jupyter runtime
dir>/cudaassert``, mode 0700), as ``plan-<key>.json`` with mode 0600, and is only ever read when
it is a regular file owned by the current user and writable by nobody else (the directory too).
The key is the kernel id (stable across a server's auto-restart), so a second notebook's kernel
sharing the profile never takes it. Claiming is one ``os.rename``: one-shot even if two processes
race. A plan is refused while its writer is still alive, and removed once it has expired. A
file that is not valid JSON is renamed aside (``.invalid``), never deleted.

Imports only the standard library and the project's own small modules (the startup stub loads it
only once a plan file is there).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from cudaassert_ipy.base.atomic_file import write_atomic
from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.restart.plan import PLAN_VERSION, PlanInvalid, ResumePlan

__all__ = [
    "PLAN_TTL",
    "PLAN_VERSION",
    "Claim",
    "PlanError",
    "claim",
    "ensure_dir",
    "log",
    "pending_keys",
    "plan_dir",
    "plan_lock",
    "why_unsafe",
    "write_plan",
]

PLAN_TTL = 3600.0  # seconds a plan waits for its restart
LOG_NAME = "resume.log"
LOG_MAX = 256 * 1024
_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

PLAN_WRITE_FAILED = "{prefix} Cannot write the resume plan into {directory} ({error}). Nothing was restarted."
UNSAFE = (
    "{prefix} The resume plan {path} was refused: {why}. A plan holds code that would run in this kernel, "
    "so only a file owned by you and writable by nobody else is used. Nothing was replayed; the file was "
    "left as it is."
)
INVALID = (
    "{prefix} The resume plan {path} is not a valid plan ({error}). Nothing was replayed; the file was kept as {kept}."
)
EXPIRED = (
    "{prefix} A resume plan from {created} expired at {expired} and was removed; nothing was replayed. "
    "Run `%cudaassert restart` again if you still want the replay."
)
WRITER_ALIVE = (
    "{prefix} A resume plan for this kernel was written by process {pid}, which is still running; "
    "it was left for that restart."
)


class PlanError(Exception):
    """A plan could not be written; the message says where and why, for the user."""


def plan_dir() -> Path:
    """``<jupyter runtime dir>/cudaassert``; without jupyter_core, ``<ipython dir>/cudaassert``."""
    try:
        from jupyter_core.paths import jupyter_runtime_dir

        base = jupyter_runtime_dir()
    except ImportError:
        from IPython.paths import get_ipython_dir

        base = get_ipython_dir()
    return Path(base) / "cudaassert"


def why_unsafe(st: os.stat_result, is_dir: bool) -> str | None:
    """Why a file (or directory) whose stat is ``st`` must not be trusted with code that runs, or None if it may.

    Plans and kept variables (restart/keep/) are both read back into a kernel, so both take the same test: a
    regular file (directory) owned by this user and writable by nobody else. Pass ``lstat`` so a link is seen.
    """
    kind = "directory" if is_dir else "file"
    if stat.S_ISLNK(st.st_mode):
        return f"it is a symbolic link, not a {kind}"
    if (stat.S_ISDIR(st.st_mode)) != is_dir or (not is_dir and not stat.S_ISREG(st.st_mode)):
        return f"it is not a regular {kind}"
    if st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    if st.st_mode & 0o022:
        return f"it is writable by {'others' if st.st_mode & 0o002 else 'its group'} (mode {st.st_mode & 0o777:o})"
    return None


def ensure_dir(directory: Path | None = None) -> Path:
    """The plan directory, created 0700; PlanError when it cannot be, or is not safely ours."""
    directory = directory or plan_dir()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        why = why_unsafe(os.lstat(directory), True)
    except OSError as e:
        raise PlanError(PLAN_WRITE_FAILED.format(prefix=PREFIX, directory=directory, error=e)) from e
    if why is not None:
        raise PlanError(PLAN_WRITE_FAILED.format(prefix=PREFIX, directory=directory, error=why))
    return directory


@contextlib.contextmanager
def plan_lock(directory: Path) -> Iterator[None]:
    """Serialise writing a plan + adding the stub against claiming + removing it (two kernels, one profile)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; the race it guards is a few microseconds wide
        yield
        return
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks (Linux), so a reused pid is not taken for the writer."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def writer_alive(pid: int | None, start: str | None) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    now = process_start(pid)
    return start is None or now is None or now == start


def write_plan(plan: ResumePlan, directory: Path | None = None) -> Path:
    """Atomically (re)place ``plan-<key>.json`` (0600), signed by this process as its writer.

    Raises PlanError with a message for the user.
    """
    key = plan.key
    if not _KEY.match(key):
        raise PlanError(PLAN_WRITE_FAILED.format(prefix=PREFIX, directory=directory, error=f"bad key {key!r}"))
    d = ensure_dir(directory)
    data = replace(plan, writer_pid=os.getpid(), writer_start=process_start(os.getpid())).to_json()
    try:
        return write_atomic(d / f"plan-{key}.json", json.dumps(data, indent=1), mode=0o600)
    except OSError as e:
        raise PlanError(PLAN_WRITE_FAILED.format(prefix=PREFIX, directory=d, error=e)) from e


@dataclass
class Claim:
    plan: ResumePlan | None = None
    notes: list[str] = field(default_factory=list)  # one-line messages for the next cell


def _when(t: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(t)))
    except (TypeError, ValueError, OverflowError):
        return "an unknown time"


def _parse(content: object, key: str) -> tuple[ResumePlan | None, str | None]:
    """(plan, None) or (None, why it is not a valid plan)."""
    try:
        return ResumePlan.from_json(content, key), None
    except PlanInvalid as e:
        return None, str(e)


def _read(path: Path) -> tuple[object, str | None, str | None]:
    """(content, unsafe-why, parse-error), opening without following links and checking the open file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        why = why_unsafe(os.fstat(f.fileno()), False)
        if why is not None:
            return None, why, None
        data = f.read(16 * 1024 * 1024)
    try:
        return json.loads(data.decode("utf-8")), None, None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, None, str(e)


def _set_aside(path: Path) -> Path:
    kept = path.with_name(path.name + ".invalid")
    if kept.exists():
        kept = path.with_name(f"{path.name}.invalid-{int(time.time())}")
    os.rename(path, kept)
    return kept


def claim(key: str, directory: Path | None = None, now: float | None = None) -> Claim:
    """Take this key's plan, once. Every refusal leaves a note and the data where it was (or aside)."""
    d = directory or plan_dir()
    path = d / f"plan-{key}.json"
    out = Claim()
    if not _KEY.match(key) or not os.path.lexists(path):
        return out
    now = time.time() if now is None else now
    try:
        why = why_unsafe(os.lstat(d), True)
        if why is not None:
            out.notes.append(UNSAFE.format(prefix=PREFIX, path=d, why=why))
            return out
        if os.path.islink(path):
            out.notes.append(UNSAFE.format(prefix=PREFIX, path=path, why="it is a symbolic link, not a file"))
            return out
        with plan_lock(d):
            content, why, error = _read(path)
            if why is not None:
                out.notes.append(UNSAFE.format(prefix=PREFIX, path=path, why=why))
                return out
            plan = None
            if error is None:
                plan, error = _parse(content, key)
            if plan is None:
                kept = _set_aside(path)
                out.notes.append(INVALID.format(prefix=PREFIX, path=path, error=error, kept=kept))
                return out
            if now > plan.expires:
                path.unlink()
                out.notes.append(
                    EXPIRED.format(prefix=PREFIX, created=_when(plan.created), expired=_when(plan.expires))
                )
                return out
            if writer_alive(plan.writer_pid, plan.writer_start):
                out.notes.append(WRITER_ALIVE.format(prefix=PREFIX, pid=plan.writer_pid))
                return out
            claimed = d / f".claimed-{key}-{os.getpid()}"
            os.rename(path, claimed)  # the one-shot step: whoever renames first owns it
            claimed.unlink()
    except FileNotFoundError:
        return out  # another process claimed it between our steps
    except OSError as e:
        out.notes.append(UNSAFE.format(prefix=PREFIX, path=path, why=f"it could not be read ({e})"))
        return out
    out.plan = plan
    return out


def pending_keys(directory: Path | None = None, now: float | None = None) -> list[str]:
    """Keys of plans a kernel may still claim (or report, when broken by hand); expired ones are removed."""
    d = directory or plan_dir()
    now = time.time() if now is None else now
    keys = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return []
    for name in names:
        if not (name.startswith("plan-") and name.endswith(".json")):
            continue
        key = name[5:-5]
        try:
            content, why, error = _read(d / name)
            age = now - os.stat(d / name).st_mtime
        except OSError:
            continue
        if why:
            continue
        plan = None if error else _parse(content, key)[0]
        if plan is None:  # broken by hand: its kernel still has to say so, for a while
            if age < PLAN_TTL:
                keys.append(key)
            continue
        if now > plan.expires:
            with contextlib.suppress(OSError):
                (d / name).unlink()
            continue
        keys.append(key)
    return keys


def log(message: str, directory: Path | None = None) -> None:
    """Startup output is lost (no parent header), so the stub and the claim write here instead."""
    d = directory or plan_dir()
    path = d / LOG_NAME
    try:
        if path.exists() and path.stat().st_size > LOG_MAX:
            path.write_bytes(path.read_bytes()[-LOG_MAX // 2 :])
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} pid={os.getpid()} {message}\n")
    except OSError:
        return  # logging is best effort; the caller's note still reaches the next cell
