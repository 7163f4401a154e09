"""The runner's settings, and how they travel to child processes (one environment variable, JSON)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["CHILD_ENV", "RERUN_ENV", "RunOptions"]

CHILD_ENV = "CUDAASSERT_RUN"  # set for the script's child processes: the startup hook reads it
RERUN_ENV = "CUDAASSERT_RERUN"  # set in the second run of --rerun-on-failure: the JSON file its report goes to


class RunOptions(NamedTuple):  # a NamedTuple: dataclasses costs ~20 ms of start-up
    validators: bool = False
    blocking: bool = False
    quiet: bool = False
    report_json: str | None = None
    rerun_on_failure: bool = False
    children: bool = True
    apply_fix: bool = False  # write the proposed patch into the script (or module) file (run/patch.py)
    bookmark_bytes: int = 256 * 1024 * 1024  # CPU batches kept per DataLoader, as the notebook extension's default

    def to_env(self) -> str:
        """What a child process needs (files and reruns stay with the parent that asked for them)."""
        flags = {"validators": self.validators, "blocking": self.blocking, "quiet": self.quiet}
        return "{" + ", ".join(f'"{k}": {str(v).lower()}' for k, v in flags.items()) + "}"  # JSON, without json

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunOptions:
        """The parent's settings in a child; defaults when the variable is absent or unreadable."""
        raw = (os.environ if environ is None else environ).get(CHILD_ENV, "")
        import json

        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {}
        get = data.get if isinstance(data, dict) else {}.get
        return cls(validators=bool(get("validators")), blocking=bool(get("blocking")), quiet=bool(get("quiet")))

    def as_dict(self) -> dict[str, object]:
        return dict(self._asdict())
