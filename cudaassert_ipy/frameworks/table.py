"""The one table of framework modules, looked up by package: the packages whose import turns each module on, and
the hooks each defines.

Adding a framework is one module, ``frameworks/<name>.py`` defining ``ADAPTER = Adapter(...)`` (its facts, its
fix words, its loader hooks), plus one row here. Nothing else names a framework: the registry loads every row's
module in this order (framework modules first, the generic one last), diagnose/hints.py reads the words through
the registry, and data/loaders loads, once per DataLoader iteration, only the modules whose packages are imported
and whose row names the hook it asks for. tests/test_frameworks_table.py fails when a module has no row, a row
has no module, or a row's packages or hooks are not its module's (a half-registered framework).

Standard library only; reading this table imports no adapter (``%load_ext`` stays cheap).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cudaassert_ipy.frameworks.base import Adapter

__all__ = ["HOOKS", "ROWS", "Row", "adapters_with", "load", "packages_with"]

#: Every hook a row may name: the optional fields of ``Adapter`` (base.py), each read by one consumer: the
#: registry (the diagnosis hooks), diagnose/hints.py (the words), data/loaders (the loader hooks).
HOOKS = frozenset(
    {
        "owns",
        "unwrap",
        "found",
        "head",
        "step",
        "launch",
        "head_words",
        "advice_words",
        "ahead",
        "batches",
        "is_loader",
        "image_of",
        "float_labels",
    }
)


@dataclass(frozen=True)
class Row:
    """One framework module: ``frameworks/<module>.py``, on while one of ``packages`` is imported."""

    module: str
    packages: tuple[str, ...]
    hooks: frozenset[str]


def _row(module: str, packages: tuple[str, ...], *hooks: str) -> Row:
    unknown = set(hooks) - HOOKS
    if unknown:
        raise ValueError(f"frameworks/table.py: {module}'s row names unknown hooks {sorted(unknown)}")
    return Row(module, packages, frozenset(hooks))


#: Every framework module, in the order their hooks run: framework ones first, the generic (torch-level) one last.
ROWS: tuple[Row, ...] = (
    _row("transformers", ("transformers", "peft"), "found", "head", "head_words", "ahead"),
    _row("accelerate", ("accelerate",), "step", "ahead"),
    _row("lightning", ("lightning", "pytorch_lightning"), "found", "head", "step", "head_words", "ahead"),
    _row("fastai", ("fastai",), "unwrap", "found", "head", "step", "head_words", "batches", "is_loader"),
    _row("keras", ("keras",), "unwrap", "found", "head", "head_words", "advice_words"),
    _row("timm", ("timm",), "found", "head", "head_words", "ahead"),
    _row("ultralytics", ("ultralytics",), "found", "head", "head_words", "image_of", "float_labels"),
    _row("deepspeed", ("deepspeed",), "found"),
    _row("launchers", ("torch", "subprocess"), "owns", "launch"),  # subprocess: always imported
    _row("engines", ("builtins",), "owns", "unwrap", "launch"),  # always on: a server's error reaches any client
    _row("generic", ("torch",), "owns", "step"),
)


def load(module: str) -> Adapter:
    """``frameworks/<module>.py``'s ``ADAPTER`` (imported on first use)."""
    adapter: Any = getattr(importlib.import_module(f"{__package__}.{module}"), "ADAPTER", None)
    if not isinstance(adapter, Adapter):
        raise TypeError(f"cudaassert_ipy.frameworks.{module} defines no ADAPTER = Adapter(...)")
    return adapter


def packages_with(hook: str) -> tuple[str, ...]:
    """The packages of every module whose row names ``hook`` (read from the table: nothing is imported)."""
    return tuple(p for row in ROWS if hook in row.hooks for p in row.packages)


def adapters_with(hook: str, modules: Mapping[str, Any] = sys.modules) -> tuple[Adapter, ...]:
    """The adapters whose row names ``hook`` and one of whose packages is imported, loading only those."""
    return tuple(load(row.module) for row in ROWS if hook in row.hooks and any(p in modules for p in row.packages))
