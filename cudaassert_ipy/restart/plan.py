"""The resume plan as a frozen, versioned type: what the restarting kernel hands the restarted one.

A plan holds code that will run, and it travels through a file, so it is read in exactly one
place (:meth:`ResumePlan.from_json`), which checks every field and refuses an old or unknown
schema version. It holds no secret: no server token, no connection-file key (issue #15).

Imports only the standard library: the startup stub's claim imports this in every resumed kernel.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeGuard

__all__ = [
    "PLAN_VERSION",
    "AppliedFix",
    "DiagnosisSummary",
    "FailingCell",
    "FrontendKind",
    "Mode",
    "PlanCell",
    "PlanInvalid",
    "RestartOutcome",
    "ResumePlan",
]

PLAN_VERSION = 2  # 2: typed plan (mode, frontend kind, failing_batch); version 1 plans are refused as invalid

DEBUG_ENV = (("CUDA_LAUNCH_BLOCKING", "1"), ("CUDAASSERT_VALIDATORS", "1"))


class Mode(Enum):
    """How the restarted kernel runs: its environment, whether validators come on, and how we say it."""

    DEBUG = "debug"
    CPU = "cpu"
    NORMAL = "normal"

    @property
    def env(self) -> dict[str, str]:
        if self is Mode.NORMAL:
            return {}
        return dict(DEBUG_ENV + ((("CUDA_VISIBLE_DEVICES", ""),) if self is Mode.CPU else ()))

    @property
    def validators(self) -> bool:
        return self is not Mode.NORMAL

    @property
    def text(self) -> str:
        return _MODE_TEXT[self]


_MODE_TEXT = {
    Mode.DEBUG: "with CUDA_LAUNCH_BLOCKING=1 and validators on",
    Mode.CPU: "on the CPU (CUDA_VISIBLE_DEVICES= hides the GPU), with validators on",
    Mode.NORMAL: "at normal speed (no blocking mode, no validators)",
}


class FrontendKind(str, Enum):
    """Who restarts this kernel (see :mod:`cudaassert_ipy.restart.frontend`)."""

    SERVER = "server"
    VSCODE = "vscode"
    KERNEL = "kernel"
    HEADLESS = "headless"
    TERMINAL = "terminal"


class RestartOutcome(str, Enum):
    """What a restart request did."""

    RESTARTING = "restarting"
    ARMED = "armed"
    FAILED = "failed"


class PlanInvalid(ValueError):
    """The plan's content is not a valid plan; the message says which field, for the INVALID note."""


@dataclass(frozen=True)
class PlanCell:
    number: int | None  # In [n] before the restart
    cell_id: str | None
    source: str
    duration: float = 0.0
    first_line: str = ""


@dataclass(frozen=True)
class FailingCell:
    number: int | None
    cell_id: str | None
    source: str
    error: str | None


@dataclass(frozen=True)
class DiagnosisSummary:
    """The few words of the diagnosis the restarted kernel repeats; never live objects."""

    cause_id: str | None = None
    title: str | None = None
    headline: str | None = None
    specific: str | None = None
    cell: int | None = None
    exception_line: str | None = None


@dataclass(frozen=True)
class AppliedFix:
    """A patch applied before the restart (``%cudaassert fix apply --restart``): the replay runs the patched cell,
    says that the notebook still holds the old code (unless a frontend applied it), then verifies."""

    number: int | None  # the patched cell's In [n]
    cell_id: str | None
    diff: str
    title: str  # the alternative applied, in words
    in_notebook: bool = False  # a frontend extension applied the edit to the notebook document too
    dataset: str | None = None  # what the verification's preflight scans, under the new facts
    num_classes: int | None = None
    ignore_index: int | None = None
    vocab_size: int | None = None
    full: bool = False  # run the whole failing cell again (the user asked), not one step on the failing batch
    failing_number: int | None = None  # the cell that failed (patched, when it is the one that defined the culprit)
    failing_source: str = ""


@dataclass(frozen=True)
class ResumePlan:
    key: str  # the plan file's key: kernel id, VS Code notebook hash, or terminal hash
    mode: Mode
    cells: tuple[PlanCell, ...]
    created: float
    expires: float
    kernel_id: str | None = None
    notebook: str | None = None
    frontend: FrontendKind | None = None
    env: tuple[tuple[str, str], ...] = ()
    validators: bool = False
    failing: FailingCell | None = None
    diagnosis: DiagnosisSummary | None = None
    failing_batch: tuple[str, tuple[int, ...]] | None = None  # (loader name, dataset indices): the bad batch
    writer_pid: int | None = None
    writer_start: str | None = None
    fix: AppliedFix | None = None  # optional in the file: a plan without it is a plain restart

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict with the schema version."""
        return {
            "version": PLAN_VERSION,
            "key": self.key,
            "kernel_id": self.kernel_id,
            "notebook": self.notebook,
            "frontend": None if self.frontend is None else self.frontend.value,
            "mode": self.mode.value,
            "env": dict(self.env),
            "validators": self.validators,
            "cells": [_cell_json(c) for c in self.cells],
            "failing": None if self.failing is None else dict(vars(self.failing)),
            "diagnosis": None if self.diagnosis is None else dict(vars(self.diagnosis)),
            "failing_batch": None
            if self.failing_batch is None
            else [self.failing_batch[0], list(self.failing_batch[1])],
            "created": self.created,
            "expires": self.expires,
            "writer_pid": self.writer_pid,
            "writer_start": self.writer_start,
            "fix": None if self.fix is None else dict(vars(self.fix)),
        }

    @classmethod
    def from_json(cls, data: object, key: str | None = None) -> ResumePlan:
        """Check every field; PlanInvalid names the first one that is wrong."""
        if not isinstance(data, dict):
            raise PlanInvalid("the top level is not an object")
        if data.get("version") != PLAN_VERSION:
            raise PlanInvalid(f"version {data.get('version')!r}, expected {PLAN_VERSION}")
        if key is not None and data.get("key") != key:
            raise PlanInvalid(f"it is for {data.get('key')!r}, not {key!r}")
        if not isinstance(data.get("key"), str):
            raise PlanInvalid("'key' is not a string")
        cells = data.get("cells")
        if not isinstance(cells, list) or not all(
            isinstance(c, dict) and isinstance(c.get("source"), str) for c in cells
        ):
            raise PlanInvalid("'cells' is not a list of cells with a 'source'")
        env = data.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise PlanInvalid("'env' is not an object of strings")
        expires = data.get("expires")
        if not _is_number(expires):
            raise PlanInvalid("'expires' is missing")
        try:
            mode = Mode(data.get("mode"))
        except ValueError:
            raise PlanInvalid(f"'mode' is {data.get('mode')!r}, not one of debug, cpu, normal") from None
        frontend = data.get("frontend")
        try:
            kind = None if frontend is None else FrontendKind(frontend)
        except ValueError:
            raise PlanInvalid(f"'frontend' is {frontend!r}") from None
        created = data.get("created")
        return cls(
            key=data["key"],
            mode=mode,
            cells=tuple(_cell(c) for c in cells),
            created=_float(created) if _is_number(created) else _float(expires),
            expires=_float(expires),
            kernel_id=_opt_str(data, "kernel_id"),
            notebook=_opt_str(data, "notebook"),
            frontend=kind,
            env=tuple(env.items()),
            validators=data.get("validators") is True,
            failing=_failing(data.get("failing")),
            diagnosis=_diagnosis(data.get("diagnosis")),
            failing_batch=_batch(data.get("failing_batch")),
            writer_pid=data["writer_pid"] if _is_int(data.get("writer_pid")) else None,
            writer_start=_opt_str(data, "writer_start"),
            fix=_fix(data.get("fix")),
        )


def _is_number(v: object) -> TypeGuard[float]:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _float(v: float) -> float:
    return float(v)


def _is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_str(d: Mapping[str, Any], name: str) -> str | None:
    v = d.get(name)
    if v is not None and not isinstance(v, str):
        raise PlanInvalid(f"'{name}' is not a string")
    return v


def _opt_int(d: Mapping[str, Any], name: str) -> int | None:
    v = d.get(name)
    if v is not None and not _is_int(v):
        raise PlanInvalid(f"'{name}' is not a whole number")
    return v


def _cell_json(c: PlanCell) -> dict[str, Any]:
    return {
        "number": c.number,
        "cell_id": c.cell_id,
        "source": c.source,
        "duration": c.duration,
        "first_line": c.first_line,
    }


def _cell(c: Mapping[str, Any]) -> PlanCell:
    duration = c.get("duration")
    first = c.get("first_line")
    return PlanCell(
        _opt_int(c, "number"),
        _opt_str(c, "cell_id"),
        c["source"],
        _float(duration) if _is_number(duration) else 0.0,
        first if isinstance(first, str) else "",
    )


def _failing(v: object) -> FailingCell | None:
    if v is None:
        return None
    if not isinstance(v, dict) or not isinstance(v.get("source", ""), str):
        raise PlanInvalid("'failing' is not a cell")
    return FailingCell(_opt_int(v, "number"), _opt_str(v, "cell_id"), v.get("source", ""), _opt_str(v, "error"))


def _diagnosis(v: object) -> DiagnosisSummary | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise PlanInvalid("'diagnosis' is not an object")
    return DiagnosisSummary(
        _opt_str(v, "cause_id"),
        _opt_str(v, "title"),
        _opt_str(v, "headline"),
        _opt_str(v, "specific"),
        _opt_int(v, "cell"),
        _opt_str(v, "exception_line"),
    )


def _batch(v: object) -> tuple[str, tuple[int, ...]] | None:
    if v is None:
        return None
    if (
        not isinstance(v, list)
        or len(v) != 2
        or not isinstance(v[0], str)
        or not isinstance(v[1], list)
        or not all(_is_int(i) for i in v[1])
    ):
        raise PlanInvalid("'failing_batch' is not [loader name, [dataset indices]]")
    return v[0], tuple(v[1])


def _fix(v: object) -> AppliedFix | None:
    if v is None:
        return None
    if not isinstance(v, dict) or not isinstance(v.get("diff"), str) or not isinstance(v.get("title"), str):
        raise PlanInvalid("'fix' is not an applied patch")
    return AppliedFix(
        _opt_int(v, "number"),
        _opt_str(v, "cell_id"),
        v["diff"],
        v["title"],
        v.get("in_notebook") is True,
        _opt_str(v, "dataset"),
        _opt_int(v, "num_classes"),
        _opt_int(v, "ignore_index"),
        _opt_int(v, "vocab_size"),
        v.get("full") is True,
        _opt_int(v, "failing_number"),
        v["failing_source"] if isinstance(v.get("failing_source"), str) else "",
    )
