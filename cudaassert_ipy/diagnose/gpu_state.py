"""What NVML says about the GPU the failure happened on: memory held, neighbours, memory-error counters.

NVML is the driver's management library, separate from the CUDA runtime: it still answers
after this process's CUDA context died, so it is safe to ask post-mortem. It is read through
nvidia-ml-py (``import pynvml``), imported lazily. Nothing here raises: no package, no driver,
no GPU or an NVML error becomes ``unavailable_reason`` and one line of text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cudaassert_ipy.base.wording import error_line, plural

__all__ = ["GpuState", "describe", "nvml_target", "reading", "reason_for", "snapshot"]

UNAVAILABLE = "GPU state unavailable: {reason}"
NO_PACKAGE = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
NOT_VISIBLE = "CUDA device {index} is not among CUDA_VISIBLE_DEVICES={visible}"
NO_SUCH_GPU = "NVML has no GPU {target}"
NVML_FAILED = "NVML error: {error}"
# NVML return code -> why the state cannot be read (codes from nvml.h, as pynvml names them)
REASONS: dict[int, str] = {
    12: "NVML library not found (no NVIDIA driver on this machine)",
    9: "the NVIDIA driver is not loaded",
    4: "no permission to query the GPU through NVML",
    15: "the GPU has fallen off the bus (NVML: GPU is lost): a hardware or driver fault, not your code",
    18: "the NVIDIA driver was updated without a reboot (NVML and driver versions differ)",
    13: "the NVIDIA driver is older than this nvidia-ml-py",
}

SOFTWARE = "software fault in your code, not the hardware: the GPU reports no uncorrectable memory errors"
SOFTWARE_PAST = (
    "software fault in your code, not the hardware: no uncorrectable memory errors since the driver "
    "loaded ({lifetime} over the GPU's lifetime, already retired or remapped)"
)
SOFTWARE_NO_ECC = "most likely a software fault in your code: this GPU does not report memory-error counters"
HARDWARE = (
    "possible hardware fault: {evidence}; tell whoever runs this machine "
    "(`nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`)"
)
ORDER_NOTE = "CUDA may number these GPUs differently from NVML: set CUDA_DEVICE_ORDER=PCI_BUS_ID"


@dataclass(frozen=True)
class GpuState:
    """One NVML snapshot; ``None`` in a field means NVML does not support it on this GPU."""

    device_index: int | None = None  # the CUDA index, as torch numbers devices
    nvml_index: int | str | None = None  # the NVML index (or UUID) it maps to
    name: str = ""
    process_bytes: int | None = None  # memory this process still holds on the device
    used_bytes: int | None = None
    total_bytes: int | None = None
    other_processes: int | None = None
    ecc_volatile_uncorrected: int | None = None  # since the driver loaded
    ecc_aggregate_uncorrected: int | None = None  # over the GPU's lifetime
    retired_pages: int | None = None  # pages retired for double-bit errors (before Ampere)
    retired_pending: bool | None = None
    remapped_rows_uncorrectable: int | None = None  # Ampere and later
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    note: str | None = None
    reading: str = ""
    unavailable_reason: str | None = None


def reading(state: GpuState) -> str:
    """Software fault vs possible hardware fault, from the memory-error counters alone."""
    evidence = []
    if state.ecc_volatile_uncorrected:
        evidence.append(plural(state.ecc_volatile_uncorrected, "uncorrectable ECC error") + " since the driver loaded")
    if state.retired_pending:
        evidence.append("a page retirement is pending (needs a GPU reset)")
    if state.remap_pending:
        evidence.append("a row remapping is pending (needs a GPU reset)")
    if state.remap_failed:
        evidence.append("a row remapping failed")
    if evidence:
        return HARDWARE.format(evidence=", ".join(evidence))
    counters = (
        state.ecc_volatile_uncorrected,
        state.ecc_aggregate_uncorrected,
        state.retired_pages,
        state.remapped_rows_uncorrectable,
    )
    if all(c is None for c in counters):
        return SOFTWARE_NO_ECC
    lifetime = max(
        state.ecc_aggregate_uncorrected or 0, state.retired_pages or 0, state.remapped_rows_uncorrectable or 0
    )
    if lifetime:
        return SOFTWARE_PAST.format(lifetime=plural(lifetime, "uncorrectable error"))
    return SOFTWARE


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def describe_parts(state: GpuState) -> list[str]:
    """The snapshot as short phrases: device, memory, neighbours, counters, reading (the panel's rows)."""
    if state.unavailable_reason is not None:
        return [UNAVAILABLE.format(reason=state.unavailable_reason)]
    where = f"GPU {state.device_index if state.device_index is not None else 0}"
    if state.nvml_index is not None and str(state.nvml_index) != str(state.device_index or 0):
        where += f", NVML index {state.nvml_index}"
    parts = [f"{state.name or 'unknown GPU'} ({where})"]
    if state.process_bytes is not None:
        parts.append(f"this process holds {_size(state.process_bytes)} of {_size(state.total_bytes)}")
    elif state.total_bytes is not None:
        parts.append(f"{_size(state.used_bytes)} of {_size(state.total_bytes)} in use")
    if state.other_processes is not None:
        others = state.other_processes
        parts.append(
            "no other processes"
            if not others
            else f"{others} other process" + ("" if others == 1 else "es") + " on the device"
        )
    counters = []
    if state.ecc_volatile_uncorrected is not None:
        counters.append(
            f"ECC uncorrectable {state.ecc_volatile_uncorrected} since driver load"
            + (f", {state.ecc_aggregate_uncorrected} lifetime" if state.ecc_aggregate_uncorrected is not None else "")
        )
    if state.retired_pages is not None:
        counters.append(f"retired pages {state.retired_pages}")
    if state.remapped_rows_uncorrectable is not None:
        counters.append(f"remapped rows {state.remapped_rows_uncorrectable}")
    parts.append(", ".join(counters) if counters else "no ECC counters")
    if state.note:
        parts.append(state.note)
    return [*parts, f"reading: {state.reading or reading(state)}"]


def describe(state: GpuState) -> str:
    """ONE line for the text report."""
    return "; ".join(describe_parts(state))


def nvml_target(device_index: int | None, visible: str | None) -> int | str:
    """The NVML index (or GPU UUID) of CUDA device ``device_index`` under CUDA_VISIBLE_DEVICES.

    CUDA reads the list up to the first invalid entry; integers are physical indices, ``GPU-``/``MIG-``
    entries are UUIDs. Raises ValueError with a user-facing reason when the device is not listed.
    """
    index = device_index or 0
    if visible is None:
        return index
    entries = []
    for raw in visible.split(","):
        entry = raw.strip()
        if entry.isdigit() or entry.startswith(("GPU-", "MIG-")):
            entries.append(int(entry) if entry.isdigit() else entry)
        else:
            break
    if index >= len(entries):
        raise ValueError(NOT_VISIBLE.format(index=index, visible=visible))
    return entries[index]


def reason_for(error: BaseException, target: int | str | None = None) -> str:
    """Why the state is unavailable, in words, for an NVMLError (or an ImportError of pynvml)."""
    if isinstance(error, ImportError):
        return NO_PACKAGE
    code = getattr(error, "value", None)
    if code in (2, 6) and target is not None:  # INVALID_ARGUMENT, NOT_FOUND
        return NO_SUCH_GPU.format(target=target)
    if isinstance(code, int) and code in REASONS:
        return REASONS[code]
    return NVML_FAILED.format(error=str(error) or type(error).__name__)


def _field(nvml: Any, fn: str, *args: Any) -> Any:
    """One NVML query; None where this GPU or driver does not support it."""
    try:
        return getattr(nvml, fn)(*args)
    except (nvml.NVMLError, AttributeError):
        return None


def _read(nvml: Any, handle: Any, state: GpuState) -> GpuState:
    name = _field(nvml, "nvmlDeviceGetName", handle) or ""
    mem = _field(nvml, "nvmlDeviceGetMemoryInfo", handle)
    compute = _field(nvml, "nvmlDeviceGetComputeRunningProcesses", handle)
    procs: dict[int, Any] = {}
    for p in (compute or []) + (_field(nvml, "nvmlDeviceGetGraphicsRunningProcesses", handle) or []):
        procs.setdefault(p.pid, p)
    mine = procs.get(os.getpid())  # absent when the container has its own PID namespace
    ecc = _field(nvml, "nvmlDeviceGetEccMode", handle)
    ecc_on = bool(ecc and ecc[0])
    unc = getattr(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    retired = _field(
        nvml, "nvmlDeviceGetRetiredPages", handle, getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    )
    pending = _field(nvml, "nvmlDeviceGetRetiredPagesPendingStatus", handle)
    rows = _field(nvml, "nvmlDeviceGetRemappedRows", handle)
    return replace(
        state,
        name=name.decode() if isinstance(name, bytes) else str(name),
        process_bytes=getattr(mine, "usedGpuMemory", None) if mine is not None else None,
        used_bytes=getattr(mem, "used", None),
        total_bytes=getattr(mem, "total", None),
        other_processes=sum(1 for pid in procs if pid != os.getpid()) if compute is not None else None,
        ecc_volatile_uncorrected=_field(
            nvml, "nvmlDeviceGetTotalEccErrors", handle, unc, getattr(nvml, "NVML_VOLATILE_ECC", 0)
        )
        if ecc_on
        else None,
        ecc_aggregate_uncorrected=_field(
            nvml, "nvmlDeviceGetTotalEccErrors", handle, unc, getattr(nvml, "NVML_AGGREGATE_ECC", 1)
        )
        if ecc_on
        else None,
        retired_pages=len(retired) if retired is not None else None,
        retired_pending=bool(pending) if pending is not None else None,
        remapped_rows_uncorrectable=rows[1] if rows is not None else None,
        remap_pending=bool(rows[2]) if rows is not None else None,
        remap_failed=bool(rows[3]) if rows is not None else None,
    )


def _order_note(nvml: Any, environ: Mapping[str, str]) -> str | None:
    """CUDA's default order is fastest first, NVML's is PCI order: they agree when all GPUs are alike."""
    if environ.get("CUDA_DEVICE_ORDER", "") == "PCI_BUS_ID":
        return None
    handles = [_field(nvml, "nvmlDeviceGetHandleByIndex", i) for i in range(_field(nvml, "nvmlDeviceGetCount") or 0)]
    names = {_field(nvml, "nvmlDeviceGetName", h) for h in handles if h is not None}
    return ORDER_NOTE if len(names) > 1 else None


def _handle(nvml: Any, target: int | str) -> Any:
    """NVML's handle for an index or a (possibly shortened, as CUDA allows) UUID."""
    if isinstance(target, int):
        return nvml.nvmlDeviceGetHandleByIndex(target)
    try:
        return nvml.nvmlDeviceGetHandleByUUID(target)
    except nvml.NVMLError:
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            if (uuid.decode() if isinstance(uuid, bytes) else str(uuid)).startswith(target):
                return handle
        raise


def snapshot(device_index: int | None = None, environ: Mapping[str, str] | None = None) -> GpuState:
    """Read the GPU that CUDA device ``device_index`` (default 0) is; never raises."""
    try:
        return _snapshot(device_index, os.environ if environ is None else environ)
    except Exception as e:  # a bug here must not cost the user their diagnosis
        reason = NVML_FAILED.format(error=error_line(e))
        return GpuState(device_index=device_index, unavailable_reason=reason)


def _snapshot(device_index: int | None, environ: Mapping[str, str]) -> GpuState:
    state = GpuState(device_index=device_index)
    try:
        target = nvml_target(device_index, environ.get("CUDA_VISIBLE_DEVICES"))
    except ValueError as e:
        return replace(state, unavailable_reason=str(e))
    state = replace(state, nvml_index=target)
    try:
        import pynvml as nvml
    except ImportError as e:
        return replace(state, unavailable_reason=reason_for(e))
    try:
        nvml.nvmlInit()
    except Exception as e:  # NVMLError, or OSError from a broken library
        return replace(state, unavailable_reason=reason_for(e))
    try:
        state = _read(nvml, _handle(nvml, target), state)
        if isinstance(target, int):
            state = replace(state, note=_order_note(nvml, environ))
        return replace(state, reading=reading(state))
    except Exception as e:
        return replace(state, unavailable_reason=reason_for(e, target))
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass  # shutting NVML down cannot change what we report
