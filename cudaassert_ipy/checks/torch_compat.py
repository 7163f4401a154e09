"""Which of torch's private APIs this torch still has: probed once, lazily, so a missing one turns one feature off.

cudaassert reads a few private torch APIs (the function-mode stack for the validators, the DataLoader iterator's
internals for the bookmark). A torch that renames or drops one of them must cost the user that one feature, with
one line in ``%cudaassert status`` saying why, and nothing else: no crash, no traceback of ours.

Each feature names the attributes it needs. ``reason(feature)`` imports torch (on the first call only) and says
why the feature is off, or None when everything is there; the answer is kept for the life of the process.
``status_lines()`` never imports torch: before torch is imported there is nothing to report.

Standard library only, and torch is imported inside the probes: ``%load_ext cudaassert`` stays light.
"""

from __future__ import annotations

import importlib
import sys
from functools import cache

__all__ = ["FEATURES", "available", "off_line", "reason", "status_lines"]

#: feature -> (its name in ``%cudaassert status``, the dotted attributes it needs). A name ending in ``()``
#: must also be callable; ``module:Class.attr`` reads an attribute of a class of an importable module.
FEATURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "validators": (
        "validators",
        (
            "torch.overrides:TorchFunctionMode",
            "torch.overrides:_push_mode()",
            "torch.overrides:_pop_mode()",
            "torch.overrides:_get_current_function_mode_stack()",
            "torch:_C.TensorBase",
            "torch:_C._len_torch_function_stack()",
            "torch:_C._get_function_stack_at()",
            "torch:_C._get_tracing_state()",
            "torch:_C._current_graph_task_id()",
            "torch:_C._functorch.is_functorch_wrapped_tensor()",
        ),
    ),
    "bookmark": (
        "DataLoader bookmark",
        (
            "torch.utils.data.dataloader:_BaseDataLoaderIter.__next__()",
            "torch.utils.data.dataloader:_BaseDataLoaderIter._next_index()",
            "torch.utils.data.dataloader:_MultiProcessingDataLoaderIter._try_put_index()",
        ),
    ),
}

#: attributes the bookmark reads on a live iterator: set in these methods (read from their code, no iterator made)
_SET_IN: dict[str, tuple[str, tuple[str, ...]]] = {
    "bookmark": (
        "torch.utils.data.dataloader:_BaseDataLoaderIter.__init__",
        ("_sampler_iter", "_num_yielded", "_dataset_kind", "_dataset", "_index_sampler", "_collate_fn"),
    ),
}
_SENT_IN = ("torch.utils.data.dataloader:_MultiProcessingDataLoaderIter._try_put_index", ("_send_idx", "_next_index"))


def _resolve(spec: str) -> object:
    module_name, _, path = spec.partition(":")
    obj: object = importlib.import_module(module_name)
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    return str(getattr(torch, "__version__", "?"))


def _missing(feature: str) -> str | None:
    """The first thing the feature needs that this torch lacks, as a phrase; None when nothing is missing."""
    for spec in FEATURES[feature][1]:
        name = spec.rstrip("()")
        shown = name.replace(":", ".")
        try:
            obj = _resolve(name)
        except ImportError as e:
            return f"{name.split(':')[0]} cannot be imported ({e})"
        except AttributeError:
            return f"{shown} is missing"
        if spec.endswith("()") and not callable(obj):
            return f"{shown} is not callable"
    checks = [_SET_IN[feature]] if feature in _SET_IN else []
    if feature == "bookmark":
        checks.append(_SENT_IN)
    for where, names in checks:
        code = getattr(_resolve(where), "__code__", None)
        used = set(getattr(code, "co_names", ()))
        lacking = [n for n in names if n not in used]
        if lacking:
            return f"{where.replace(':', '.')} no longer uses {', '.join(lacking)}"
    return None


@cache
def reason(feature: str) -> str | None:
    """Why ``feature`` is off with this torch ("torch 2.x: torch._C._len_torch_function_stack is missing"), or None.

    Imports torch on the first call; never raises (a probe that fails in an unforeseen way turns the feature off).
    """
    try:
        missing = _missing(feature)
    except Exception as e:  # a probe must never be what breaks the extension
        missing = f"probing it failed ({type(e).__name__}: {e})"
    return None if missing is None else f"torch {_torch_version()}: {missing}"


def available(feature: str) -> bool:
    return reason(feature) is None


def off_line(feature: str) -> str | None:
    """The one ``%cudaassert status`` line for a feature this torch cannot support, or None."""
    why = reason(feature)
    if why is None:
        return None
    return f"{FEATURES[feature][0]}: off - {why}; the rest of cudaassert works"


def status_lines() -> list[str]:
    """One line per feature this torch cannot support; nothing before torch is imported (no probe imports it)."""
    if "torch" not in sys.modules:
        return []
    return [line for feature in FEATURES if (line := off_line(feature)) is not None]
