"""Post-mortem evidence: host-side facts still readable after a CUDA failure.

Everything here reads host metadata only (shapes, dtypes, devices, module attributes, Python
lists). Values are read from CPU tensors only, and never from a CUDA tensor: after a sticky
error any GPU access (``.item()``, ``.cpu()``, ``repr``) fails or hangs.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cudaassert_ipy.base.wording import is_cell_filename
from cudaassert_ipy.capture.assert_lines import AssertSite
from cudaassert_ipy.capture.child_lines import error_frames
from cudaassert_ipy.capture.tracebacks import Frame, frames_in_text
from cudaassert_ipy.diagnose.chain import failure_place, first_error_frames, follow_on_lines
from cudaassert_ipy.diagnose.detection import Detection
from cudaassert_ipy.diagnose.facts import CallFacts, FloatValues, LabelValues, ModuleFact, TensorFact
from cudaassert_ipy.frameworks import ADAPTERS, Adapter, ClassHead, Stack, gather
from cudaassert_ipy.frameworks.generic import declared_classes, true_shape
from cudaassert_ipy.frameworks.registry import failure_notes

__all__ = ["CallFacts", "Evidence", "FloatValues", "LabelValues", "ModuleFact", "TensorFact", "collect"]

_MAX_VALUE_NUMEL = 50_000_000  # larger CPU tensors are described, not scanned
_INT_DTYPES = ("torch.int64", "torch.int32", "torch.int16", "torch.int8", "torch.uint8")


@dataclass(frozen=True)
class Evidence:
    """All the facts one diagnosis is built from."""

    detection: Detection
    sites: tuple[AssertSite, ...] = ()
    cell_source: str = ""
    execution_count: int | None = None
    user_frame: tuple[str, int, str] | None = None  # (file label, line number, code)
    tensors: tuple[TensorFact, ...] = ()
    linears: tuple[ModuleFact, ...] = ()
    embeddings: tuple[ModuleFact, ...] = ()
    losses: tuple[ModuleFact, ...] = ()
    configs: tuple[ModuleFact, ...] = ()  # Hugging Face style configs: vocab_size, num_labels
    datasets: tuple[tuple[str, int], ...] = ()  # (name, number of classes)
    tokenizers: tuple[tuple[str, int], ...] = ()  # (name, len(tokenizer))
    labels: tuple[LabelValues, ...] = ()
    call: CallFacts | None = None  # the innermost torch.nn.functional call (F.cross_entropy), as facts
    stderr_text: str = ""
    # what the framework adapters added (frameworks/): all empty when no framework is involved
    head: ClassHead | None = None  # where the user's framework sets the model's class count
    framework_facts: tuple[tuple[str, str], ...] = ()  # ("model.hparams", "num_classes=3")
    follow_ons: tuple[str, ...] = ()  # one line per later error raised by cleanup
    unread: tuple[str, ...] = ()  # what the adapters could not read: "trainer.train_dataset (none)"
    notes: tuple[str, ...] = ()  # "[internal]" notes of adapters that failed
    advice: tuple[str, ...] = ()  # keys of hints.FRAMEWORK_ADVICE the adapters asked for ("keras_filtered")
    #: the first error's frames as printed (file, line, function, source line): what a pasted report holds
    frames: tuple[Frame, ...] = ()
    #: the whole pasted text or log, when the failure was read from one (a framework's object reprs and paths)
    pasted: str = ""


def collect(
    detection: Detection,
    sites: Iterable[AssertSite] = (),
    cell_source: str = "",
    execution_count: int | None = None,
    user_ns: Mapping[str, Any] | None = None,
    stderr_text: str = "",
    user_files: Container[str] = (),
    adapters: Sequence[Adapter] = ADAPTERS,
) -> Evidence:
    """Gather evidence from the exception's traceback, the user's namespace and the cell.

    ``user_files`` (anything with ``in``) names files that count as the user's code besides notebook
    cells: a script runner passes the script's own files. ``adapters``: the framework adapters asked."""
    torch = sys.modules.get("torch")
    frames = list(first_error_frames(detection))  # the first error's, when cleanup raised a later one
    user_frame = _user_frame(frames, user_files)
    if user_frame is None and detection.launch is not None:  # a launcher's frames only: the child's traceback
        user_frame = _child_user_frame((detection.launch.text, stderr_text), user_files)
    found = gather(Stack(tuple(frames), user_ns if user_ns is not None else {}), adapters)
    follow_ons, follow_notes = follow_on_lines(detection, failure_place(frames, user_files), adapters)
    # The names the user knows first: the notebook's globals, then cell frames outermost to
    # innermost (``self.embed`` inside forward is ``lm.embed`` to the user), then what the framework
    # adapters found (``trainer.model``, the Trainer's ``inputs['labels']``); first name wins.
    namespaces: list[Mapping[str, Any]] = [user_ns] if user_ns is not None else []
    namespaces += [f.f_locals for f in frames if is_cell_filename(f.f_code.co_filename, user_files)]
    namespaces.append(dict(found.objects))
    facts = _Facts(torch)
    for ns in namespaces:
        facts.scan_namespace(ns)
    for name, n in found.declared:
        facts.datasets.setdefault(name, n)
    call: CallFacts | None = None
    torch_frame = _innermost_torch_frame(frames)
    if torch_frame is not None:
        call_locals = {k: v for k, v in torch_frame.f_locals.items() if not k.startswith("__")}
        facts.scan_namespace(call_locals, prefix=f"{torch_frame.f_code.co_name}:")
        call = facts.call(torch_frame.f_code.co_name, call_locals)
    return Evidence(
        detection=detection,
        sites=tuple(sites),
        cell_source=cell_source,
        execution_count=execution_count,
        user_frame=user_frame,
        tensors=tuple(facts.tensors.values()),
        linears=tuple(facts.linears.values()),
        embeddings=tuple(facts.embeddings.values()),
        losses=tuple(facts.losses.values()),
        configs=tuple(facts.configs.values()),
        datasets=tuple(facts.datasets.items()),
        tokenizers=tuple(facts.tokenizers.items()),
        labels=tuple(facts.labels.values()),
        call=call,
        stderr_text=stderr_text,
        head=found.head,
        framework_facts=found.facts,
        follow_ons=follow_ons,
        unread=found.missing,
        notes=(*detection.notes, *failure_notes(found.failures), *follow_notes),
        advice=found.advice,
        # a launched child's failure: the child's own traceback is where its failure point is
        frames=frames_in_text(detection.launch.text) if detection.launch is not None else printed_frames(frames),
    )


def printed_frames(frames: Sequence[types.FrameType]) -> tuple[Frame, ...]:
    """The live frames as a traceback prints them, so live errors and pasted text meet the same frame catalogue."""
    import linecache

    out = []
    for frame in frames:
        code = frame.f_code
        name = code.co_filename
        out.append(
            Frame(
                name,
                frame.f_lineno,
                getattr(code, "co_qualname", code.co_name),
                linecache.getline(name, frame.f_lineno).strip(),
            )
        )
    return tuple(out)


def _user_frame(frames: list[types.FrameType], user_files: Container[str] = ()) -> tuple[str, int, str] | None:
    """The innermost frame in the user's cells (or files): the line they wrote, not PyTorch's internals."""
    import linecache

    for frame in reversed(frames):
        name = frame.f_code.co_filename
        if is_cell_filename(name, user_files):
            lineno = frame.f_lineno
            return name, lineno, linecache.getline(name, lineno).strip()
    return None


def _child_user_frame(texts: Iterable[str], user_files: Container[str]) -> tuple[str, int, str] | None:
    """The innermost frame in the user's files of the traceback a launched child printed with its CUDA error."""
    import linecache

    for text in texts:
        for name, lineno, code in reversed(error_frames(text)):
            if is_cell_filename(name, user_files):
                return name, lineno, code or linecache.getline(name, lineno).strip()
    return None


def _innermost_torch_frame(frames: list[types.FrameType]) -> types.FrameType | None:
    for frame in reversed(frames):
        if "/torch/nn/functional.py" in frame.f_code.co_filename.replace("\\", "/"):
            return frame
    return None


class _Facts:
    """Accumulates facts by name; first sighting wins (frames are scanned innermost first)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.tensors: dict[str, TensorFact] = {}
        self.linears: dict[str, ModuleFact] = {}
        self.embeddings: dict[str, ModuleFact] = {}
        self.losses: dict[str, ModuleFact] = {}
        self.configs: dict[str, ModuleFact] = {}
        self.datasets: dict[str, int] = {}
        self.tokenizers: dict[str, int] = {}
        self.labels: dict[str, LabelValues] = {}
        self._seen_modules: set[int] = set()
        self._seen_tensors: set[int] = set()

    def scan_namespace(self, ns: Mapping[str, Any], prefix: str = "") -> None:
        for name, value in list(ns.items()):
            if name.startswith("_") or isinstance(value, (types.ModuleType, type, types.FunctionType)):
                continue
            try:
                self._scan_value(prefix + name, value)
            except Exception:  # one odd object must not cost the whole diagnosis
                continue

    def _scan_value(self, name: str, value: Any) -> None:
        torch = self.torch
        if torch is not None and isinstance(value, torch.Tensor):
            self._tensor(name, value)
        elif torch is not None and isinstance(value, torch.nn.Module):
            self._module(name, value)
        elif torch is not None and isinstance(value, torch.utils.data.DataLoader):
            self._dataset(name + ".dataset", value.dataset)
        else:
            self._dataset(name, value)
            self._config(name, value)
            self._tokenizer(name, value)

    def _tensor(self, name: str, t: Any) -> None:
        fake = type(t).__name__ in ("FakeTensor", "FunctionalTensor")
        if fake or name in self.tensors or id(t) in self._seen_tensors:
            return  # the same tensor keeps the first (user-facing) name it was seen under
        self._seen_tensors.add(id(t))
        self.tensors[name] = TensorFact(name, true_shape(t), str(t.dtype), str(t.device))
        # values only from CPU tensors: a CUDA tensor may belong to a dead context
        if t.device.type == "cpu" and str(t.dtype) in _INT_DTYPES and 0 < t.numel() <= _MAX_VALUE_NUMEL:
            lo, hi = t.min(), t.max()
            self.labels[name] = LabelValues(name, tuple(t.shape), int(lo), int(hi), t.detach())

    def call(self, function: str, params: Mapping[str, Any]) -> CallFacts | None:
        """Plain facts about one call's parameters; None when they cannot be read."""
        try:
            return self._call(function, params)
        except Exception:  # odd arguments must not cost the whole diagnosis
            return None

    def _call(self, function: str, params: Mapping[str, Any]) -> CallFacts:
        torch = self.torch
        tensors, ints, floats, scalars = [], [], [], []
        for key, value in params.items():
            if isinstance(value, (int, float, str, bool)) or value is None:
                scalars.append((key, value))
            elif torch is not None and isinstance(value, torch.Tensor):
                tensors.append((key, TensorFact(key, true_shape(value), str(value.dtype), str(value.device))))
                label = self._same_label(value)
                if label is not None:
                    ints.append((key, label))
                elif self._readable(value) and value.is_floating_point():
                    floats.append((key, self._floats(f"{function}:{key}", value.detach())))
        return CallFacts(function, tuple(tensors), tuple(ints), tuple(floats), tuple(scalars))

    def _readable(self, t: Any) -> bool:
        fake = type(t).__name__ in ("FakeTensor", "FunctionalTensor")
        return not fake and t.device.type == "cpu" and 0 < t.numel() <= _MAX_VALUE_NUMEL

    def _same_label(self, t: Any) -> LabelValues | None:
        """The label values already read for this very tensor (or a view starting at its data)."""
        if not self._readable(t):
            return None
        for label in self.labels.values():
            try:
                if label.tensor.data_ptr() == t.data_ptr() and label.shape == tuple(t.shape):
                    return label
            except Exception:
                continue
        return None

    def _floats(self, name: str, t: Any) -> FloatValues:
        finite = t[t.isfinite()]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.numel() else (0.0, 0.0)
        return FloatValues(name, tuple(t.shape), lo, hi, bool(t.isnan().any()), t)

    def _module(self, name: str, module: Any) -> None:
        if id(module) in self._seen_modules:
            return
        self._seen_modules.add(id(module))
        nn = self.torch.nn
        for sub, m in module.named_modules():
            full = f"{name}.{sub}" if sub else name
            if isinstance(m, nn.Linear):
                self.linears[full] = ModuleFact(
                    full, type(m).__name__, (("in_features", m.in_features), ("out_features", m.out_features))
                )
            elif isinstance(m, (nn.Embedding, nn.EmbeddingBag)):
                self.embeddings[full] = ModuleFact(
                    full,
                    type(m).__name__,
                    (
                        ("num_embeddings", m.num_embeddings),
                        ("embedding_dim", m.embedding_dim),
                        ("padding_idx", getattr(m, "padding_idx", None)),
                    ),
                )
            elif hasattr(m, "ignore_index") and type(m).__name__.endswith("Loss"):
                self.losses[full] = ModuleFact(full, type(m).__name__, (("ignore_index", m.ignore_index),))
            elif type(m).__name__.endswith(("Loss", "CrossEntropy")):  # timm's LabelSmoothingCrossEntropy
                smoothing = getattr(m, "smoothing", None)
                attrs = (("smoothing", smoothing),) if isinstance(smoothing, float) else ()
                self.losses[full] = ModuleFact(full, type(m).__name__, attrs)
            config = getattr(m, "config", None)
            if config is not None and not sub:
                self._config(f"{full}.config", config)

    def _dataset(self, name: str, value: Any) -> None:
        declared = declared_classes(value, name)  # torchvision's classes, HF datasets' ClassLabel
        if declared is not None:
            self.datasets.setdefault(*declared)
        targets = getattr(value, "targets", None)
        if targets is not None and self.torch is not None:
            if isinstance(targets, list) and targets and isinstance(targets[0], int) and len(targets) < 10_000_000:
                targets = self.torch.tensor(targets)
            if isinstance(targets, self.torch.Tensor):
                self._tensor(f"{name}.targets", targets)

    def _config(self, name: str, value: Any) -> None:
        if type(value).__name__.endswith("Config") and hasattr(value, "vocab_size"):
            attrs = tuple(
                (k, getattr(value, k))
                for k in ("vocab_size", "num_labels", "max_position_embeddings", "type_vocab_size")
                if isinstance(getattr(value, k, None), int)
            )
            self.configs.setdefault(name, ModuleFact(name, type(value).__name__, attrs))

    def _tokenizer(self, name: str, value: Any) -> None:
        if "Tokenizer" in type(value).__name__ and hasattr(value, "__len__"):
            self.tokenizers.setdefault(name, len(value))
