"""Keras 3 on the torch backend: the re-created, ANSI-wrapped error, the filtered frames, the model's facts.

With traceback filtering on (the default), an error raised inside a layer's call is re-created by
``inject_argument_info_in_traceback`` (``keras/src/utils/traceback_utils.py``): ``e.__class__(message)`` (or
``RuntimeError(message)``) with the message "Exception encountered when calling X.\\n\\n\\x1b[1m<the original
message>\\x1b[0m\\n\\nArguments received by X: ...", raised ``from None`` (the original stays in
``__context__``); ``filter_traceback`` around ``fit`` and ``Layer.__call__`` removes every Keras frame. The
model's frames are gone, so the facts come from the user's ``keras.Model`` in the namespace: the last
layer's ``units`` (``Dense(N)``) and the loss. On the torch backend a Keras model is a ``torch.nn.Module``.
The first sync after an assert is swallowed by ``pythonify_logs`` (a bare ``except``): the error surfaces
one step later, at the next step's first kernel.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from cudaassert_ipy.frameworks.base import Adapter, ClassHead, Found, Reader, Stack, frame_module, is_class

__all__ = ["ADAPTER", "is_model"]

PACKAGES = ("keras",)
_RECREATED = re.compile(
    r"\AException encountered when calling [^\n]*\.\n\n\x1b\[1m(?P<own>.*?)\x1b\[0m(?:\n\nArguments received by .*)?\Z",
    re.DOTALL,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: The module of Keras' traceback filter: its ``error_handler`` frames are all that is left of Keras.
_FILTER = "keras.src.utils.traceback_utils"


def is_model(obj: Any) -> bool:
    """A ``keras.Model`` (``Sequential``, functional, a user's subclass)."""
    return is_class(obj, "Model", PACKAGES)


def _unwrap(exc: BaseException, text: str) -> str | None:
    """The original message inside Keras' "Exception encountered when calling X" wrapper, ANSI codes removed."""
    match = _RECREATED.match(text)
    own = match.group("own") if match else text
    plain = _ANSI.sub("", own)
    return plain if (match or plain != text) else None


def _model(stack: Stack) -> Any:
    """The model that failed: a Keras frame's ``self`` (filtering off), else the user's model in the namespace."""
    running = next((obj for _, obj in stack.selves(*PACKAGES) if is_model(obj)), None)
    if running is not None:
        return running
    return next((v for k, v in list(stack.user_ns.items()) if not k.startswith("_") and is_model(v)), None)


def _last_layer(model: Any, read: Reader, name: str) -> Any:
    """``model.layers[-1]``, or None (a read that raises is one "could not read" entry)."""
    layers = read.get(model, "layers", name)
    return read.call(lambda: layers[-1] if layers else None, f"{name}.layers[-1]")


def _units(model: Any, read: Reader, name: str) -> int | None:
    last = _last_layer(model, read, name)
    units = read.get(last, "units", f"{name}.layers[-1]") if last is not None else None
    return units if isinstance(units, int) and not isinstance(units, bool) else None


def _head(obj: Any, name: str, read: Reader) -> ClassHead | None:
    if not is_model(obj):
        return None
    units = _units(obj, read, name)
    if units is None:
        return None
    return ClassHead("keras", now=units, setting="units", owner=f"{name}.layers[-1]")


def _layer_line(model: Any, read: Reader, name: str) -> tuple[str, str] | None:
    last = _last_layer(model, read, name)
    if last is None:
        return None
    parts = []
    units = read.get(last, "units", f"{name}.layers[-1]")
    if isinstance(units, int):
        parts.append(f"units={units}")
    activation = read.get(last, "activation", f"{name}.layers[-1]")
    act = getattr(activation, "__name__", None)
    if isinstance(act, str):
        parts.append(f"activation={act}")
    return f"{name}.layers[-1]", f"{type(last).__name__}({', '.join(parts)})"


def _loss_line(model: Any, read: Reader, name: str) -> tuple[str, str] | None:
    """``sparse_categorical_crossentropy(from_logits=True)``: compile() wraps a loss as ``LossFunctionWrapper``."""
    loss = read.get(model, "loss", name)
    if loss is None:
        return None
    if isinstance(loss, str):
        return f"{name}.loss", loss
    fn = read.get(loss, "fn", f"{name}.loss")
    label = getattr(fn, "__name__", None) or getattr(loss, "name", None) or type(loss).__name__
    kwargs = read.get(loss, "_fn_kwargs", f"{name}.loss")
    shown = ""
    if isinstance(kwargs, dict):
        shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items() if v is not None)
    else:
        logits = read.get(loss, "from_logits", f"{name}.loss")
        shown = f"from_logits={logits}" if isinstance(logits, bool) else ""
    return f"{name}.loss", f"{label}({shown})"


def _filtered(stack: Stack, read: Reader) -> bool:
    """Whether Keras filtered the frames the user sees: its traceback filter ran (an ``error_handler`` frame) and
    filtering is on (``keras.config.is_traceback_filtering_enabled()``, read where Keras keeps it)."""
    if not any(frame_module(f) == _FILTER for f in stack.frames):
        return False
    enabled = getattr(sys.modules.get(_FILTER), "is_traceback_filtering_enabled", None)
    if not callable(enabled):
        return True
    on = read.call(enabled, "keras.config.is_traceback_filtering_enabled()")
    return True if on is None else bool(on)  # cannot tell: the frames are there, so say how to see them all


def _found(stack: Stack, read: Reader) -> Found | None:
    model = _model(stack)
    advice = ("keras_filtered",) if _filtered(stack, read) else ()
    if model is None:
        return Found(advice=advice) if advice else None
    name = stack.name_of(model, "model")
    facts = [line for line in (_layer_line(model, read, name), _loss_line(model, read, name)) if line is not None]
    return Found(objects=((name, model),), facts=tuple(facts), advice=advice)


#: How a Keras model's class count is set (hints.py composes the fix from it).
HEAD_WORDS = {"keras": "make the last layer Dense({n})"}
#: The notes ``_found`` asks for by key (``Found.advice``), said once under the report.
ADVICE_WORDS = {
    "keras_filtered": (
        "Keras removed its own frames from this traceback and re-created the error: to see them, run "
        "keras.config.disable_traceback_filtering() and run the cell again."
    ),
}

ADAPTER = Adapter(
    name="keras",
    packages=PACKAGES,
    unwrap=_unwrap,
    found=_found,
    head=_head,
    head_words=HEAD_WORDS,
    advice_words=ADVICE_WORDS,
)
