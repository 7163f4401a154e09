"""The GPU failure raised where a framework surfaces it: later than the failing kernel, and then sticky.

On a GPU a failing kernel does not stop the host. Its assertion lines reach fd 2 when it runs, the
host goes on (backward, the optimizer), the error is raised by a later call that waits for the GPU
(``loss.item()``, the HF Trainer's ``torch.isnan(tr_loss_step)``), and from then on every CUDA call
raises it again: a framework's cleanup (Lightning's teardown moving the model to the CPU, a checkpoint
on exception) fails too, while the first error is handled. ``DeadGpu`` replays exactly that on the CPU
around real framework code, with the exact lines and exception texts of :mod:`gpu_double`:

    with DeadGpu(surfaces={torch.isnan}):
        trainer.train()

Only the GPU is simulated: the framework, its loops, its exception handling and its teardown run for real.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from gpu_double import DEVICE_ASSERT_WORDINGS, assertion_lines, make_exception
from torch.overrides import TorchFunctionMode

#: The kernels replayed: their CPU twin raises IndexError where the CUDA kernel asserts.
KERNELS: dict[Callable[..., Any], str] = {
    F.cross_entropy: "nll_loss_target_out_of_range",
    F.nll_loss: "nll_loss_target_out_of_range",
}
#: Index kernels replayed: their CPU twin raises "index N is out of bounds for dimension D with size S"
#: (RuntimeError) where ScatterGatherKernel.cu asserts; ``(input, dim, index)`` as gather takes them.
INDEX_KERNELS: dict[Callable[..., Any], str] = {
    torch.gather: "scatter_gather_index_out_of_range_v2",
    torch.Tensor.gather: "scatter_gather_index_out_of_range_v2",
}


class DeadGpu(TorchFunctionMode):
    """A device that asserts in ``KERNELS`` on bad labels, surfaces the error at one of ``surfaces`` (the next
    call that syncs), and is dead for every torch call after that."""

    def __init__(self, surfaces: Iterable[Callable[..., Any]], version: str = "2.9+", threads: int = 4) -> None:
        super().__init__()
        self.surfaces = set(surfaces)
        self.version = version
        self.threads = threads
        self.asserted = False  # a kernel asserted: its lines are on fd 2, the host does not know yet
        self.dead = False  # the error surfaced once: every later call raises it again

    def error(self) -> BaseException:
        return make_exception(*DEVICE_ASSERT_WORDINGS[self.version])

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if (self.dead and _touches_tensors(args, kwargs) and not _host_metadata(func)) or (
            self.asserted and func in self.surfaces
        ):
            self.dead = True  # every later call on the (simulated) GPU's tensors fails too
            raise self.error()
        if func in INDEX_KERNELS:
            return self._index_kernel(func, args, kwargs)
        cause = KERNELS.get(func)
        if cause is None:
            return func(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        except IndexError:  # the CPU twin: on a GPU the kernel asserts, computes garbage, and the host goes on
            os.write(2, assertion_lines(cause, threads=self.threads))
            self.asserted = True
            logits, target = args[0], args[1]
            garbage = torch.where((target >= logits.shape[1]) | (target < 0), 0, target)
            return func(logits, garbage, *args[2:], **kwargs)

    def _index_kernel(self, func: Any, args: Any, kwargs: Any) -> Any:
        """gather with an index out of range: the assertion lines, then the result of a clamped index."""
        try:
            return func(*args, **kwargs)
        except RuntimeError as error:
            if "out of bounds" not in str(error):
                raise
        os.write(2, assertion_lines(INDEX_KERNELS[func], threads=self.threads))
        self.asserted = True
        values = {**dict(zip(("input", "dim", "index"), args)), **kwargs}
        size = values["input"].shape[values["dim"]]
        values["index"] = values["index"].clamp(0, size - 1)
        return func(values["input"], values["dim"], values["index"])


#: Tensor methods that read host-side metadata only: they work on a dead GPU (shape, dtype, device, ...).
_METADATA_METHODS = frozenset(
    {
        "size",
        "dim",
        "numel",
        "stride",
        "element_size",
        "is_floating_point",
        "is_complex",
        "is_contiguous",
        "get_device",
        "data_ptr",
        "__len__",
    }
)


def _host_metadata(func: Any) -> bool:
    """Whether ``func`` only reads a tensor's host-side metadata: a property (``Tensor.shape.__get__``, ``dtype``,
    ``device``, ``requires_grad``) or a metadata method. A dead GPU answers these; Keras reads them to word its
    re-created message, Lightning to log."""
    name = getattr(func, "__name__", "")
    return name == "__get__" or name in _METADATA_METHODS


def _touches_tensors(args: Any, kwargs: Any) -> bool:
    """Whether a call gets a tensor (those are on the dead GPU in the story); ``torch.device("cpu")`` does not."""
    values = [*args, *kwargs.values()]
    return any(
        isinstance(v, torch.Tensor) or (isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v))
        for v in values
    )
