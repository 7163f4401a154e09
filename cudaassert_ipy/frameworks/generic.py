"""torch's own cleanup and wrappers, for every framework: the adapter that runs last.

Steps that touch a dead GPU after the first failure, whoever calls them: ``torch.cuda.empty_cache()``,
moving a module (``.cpu()`` / ``.to()``), ``torch.save`` (a checkpoint then is missing), the DataLoader's
worker shutdown, destructors. Wrappers around a model (what accelerate's ``unwrap_model`` strips: DDP/FSDP
``.module``, ``torch.compile``'s ``_orig_mod``, DeepSpeed's engine), ZeRO-3's true parameter shapes, and the
class count a dataset declares (torchvision's ``classes``, HF datasets' ``ClassLabel``).
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any

from cudaassert_ipy.frameworks.base import Adapter, Reader, Step, class_names, frame_module, frame_self

__all__ = ["ADAPTER", "declared_classes", "true_shape", "unwrap_model"]

#: Wrapper classes whose ``.module`` is the model (torch DDP/DataParallel/FSDP, DeepSpeed's engine).
_WRAPPERS = frozenset(
    {"DistributedDataParallel", "DataParallel", "FullyShardedDataParallel", "DeepSpeedEngine", "PipelineEngine"}
)


def unwrap_model(model: Any, limit: int = 8) -> Any:
    """The user's module under DDP/FSDP/DeepSpeed and ``torch.compile`` wrappers (what accelerate's
    ``unwrap_model`` returns), found by class names and attributes."""
    for _ in range(limit):
        names = class_names(model)
        if "OptimizedModule" in names and getattr(model, "_orig_mod", None) is not None:
            model = model._orig_mod
        elif _WRAPPERS.intersection(names) and getattr(model, "module", None) is not None:
            model = model.module
        else:
            break
    return model


def declared_classes(dataset: Any, name: str, read: Reader | None = None) -> tuple[str, int] | None:
    """How many classes a dataset declares, and what lists them (its ``.classes``): a torchvision-style
    ``classes`` list (``train_ds``), or a Hugging Face ``datasets`` ``ClassLabel`` feature
    (``train_ds.features['label']``). None when it declares none, or cannot be read (said by ``read``, when
    given: an adapter's "could not read" line)."""
    found: tuple[str, int] | None = (read or Reader()).call(lambda: _declared(dataset, name), name)
    return found


def _declared(dataset: Any, name: str) -> tuple[str, int] | None:
    classes = getattr(dataset, "classes", None)
    if isinstance(classes, (list, tuple)) and classes:
        return name, len(classes)
    features = getattr(dataset, "features", None)
    if isinstance(features, Mapping):
        for key, feature in features.items():
            n = getattr(feature, "num_classes", None)
            if isinstance(n, int) and n > 0 and type(feature).__name__ == "ClassLabel":
                return f"{name}.features[{key!r}]", n
    return None


def true_shape(tensor: Any) -> tuple[int, ...]:
    """A parameter's real shape: DeepSpeed ZeRO-3 frees it (``weight.shape`` reads ``(0,)``) and keeps the
    shape in ``ds_shape``."""
    shape = getattr(tensor, "ds_shape", None)
    if shape is not None:
        try:
            return tuple(int(n) for n in shape)
        except (TypeError, ValueError):
            pass
    return tuple(tensor.shape)


def _step(frames: Sequence[types.FrameType]) -> Step | None:
    """The innermost torch-level cleanup among the later error's frames."""
    for frame in reversed(frames):
        module, function = frame_module(frame), frame.f_code.co_name
        if module == "torch.cuda.memory" and function == "empty_cache":
            return Step("torch.cuda.empty_cache()")
        if module == "torch.serialization" and function in ("save", "_save"):
            return Step("torch.save", lost="the file it was writing")
        if module == "torch.utils.data.dataloader" and function in ("_shutdown_workers", "__del__"):
            return Step("the DataLoader's worker shutdown")
        if module == "torch.nn.modules.module" and function in ("cpu", "to", "cuda"):
            return Step(f"moving the model (`Module.{function}()`)")
        if function == "__del__":
            owner = frame_self(frame)
            return Step(f"a destructor (`{type(owner).__name__}.__del__`)" if owner is not None else "a destructor")
    return None


ADAPTER = Adapter(name="generic", packages=("torch",), owns=lambda stack: False, step=_step)
