"""DeepSpeed: the engine wraps the user's model; ZeRO-3 frees the parameters it partitions.

In a rank, the engine adds no handler: the error comes from the user's forward or from ``engine.backward`` /
``engine.step``. ``engine.module`` is the user's model (also unwrapped by
:func:`cudaassert_ipy.frameworks.generic.unwrap_model`). ZeRO-3 sets ``param.data = torch.empty(0)`` and keeps the
true shape in ``param.ds_shape`` (``deepspeed/runtime/zero/partition_parameters.py``): the evidence reads shapes
through :func:`~cudaassert_ipy.frameworks.generic.true_shape` and class counts from module attributes
(``out_features``), never from ``weight.shape``. The launcher's lines ("Killing subprocess N", "... exits with
return code = N") are read by the log explainer (capture/child_lines.py, logs/explain.py).

DeepSpeed is not installed where this project is tested: this adapter follows DeepSpeed's source
(``runtime/engine.py``: ``module``, ``zero_optimization_stage()``, ``global_steps``, ``micro_steps``) and runs
only while ``deepspeed`` is imported.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from cudaassert_ipy.frameworks.base import Adapter, Found, Reader, Stack, class_names, frame_self, made_by

__all__ = ["ADAPTER"]

PACKAGES = ("deepspeed",)
_ENGINES = frozenset({"DeepSpeedEngine", "PipelineEngine", "DeepSpeedHybridEngine"})
ZERO3 = "ZeRO stage 3: parameters are partitioned (`weight.shape` reads 0); shapes here come from `ds_shape`"


def is_engine(obj: Any) -> bool:
    return made_by(obj, PACKAGES) and bool(_ENGINES.intersection(class_names(obj)))


def _locals(frame: types.FrameType) -> list[Any]:
    return list(frame.f_locals.values())


def _engine(stack: Stack, read: Reader) -> Any:
    """The engine of the failing call: a frame running one of its methods, else one a frame holds (the user's
    loop keeps ``model_engine``); one merely in the namespace says nothing about this failure."""
    for frame in reversed(stack.frames):
        obj = frame_self(frame)
        if is_engine(obj):
            return obj
    for frame in reversed(stack.frames):
        values = read.call(functools.partial(_locals, frame), f"the locals of {frame.f_code.co_name}")
        if values is None:  # a frame whose locals cannot be read
            continue
        found = next((v for v in values if is_engine(v)), None)
        if found is not None:
            return found
    return None


def _found(stack: Stack, read: Reader) -> Found | None:
    engine = _engine(stack, read)
    if engine is None:
        return None
    name = stack.name_of(engine, "engine")
    module = read.get(engine, "module", name, needed=True)
    facts: list[tuple[str, str]] = []
    stage_of = read.get(engine, "zero_optimization_stage", name)
    stage = read.call(stage_of, f"{name}.zero_optimization_stage()") if callable(stage_of) else None
    if stage == 3:
        facts.append((name, ZERO3))
    steps = [
        f"{label} {value}"
        for label, value in (
            ("global step", read.get(engine, "global_steps", name)),
            ("micro step", read.get(engine, "micro_steps", name)),
        )
        if isinstance(value, int)
    ]
    if steps:
        facts.append((f"{name} progress", ", ".join(steps)))
    objects = ((f"{name}.module", module),) if module is not None else ()
    return Found(objects=objects, facts=tuple(facts))


ADAPTER = Adapter(name="deepspeed", packages=PACKAGES, found=_found)
