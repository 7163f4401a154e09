"""The GPU state line: one line, never an exception; the software-vs-hardware reading on constructed counters."""

from __future__ import annotations

import ctypes
import sys
from dataclasses import replace

import pynvml
import pytest

from cudaassert_ipy.diagnose import gpu_state
from cudaassert_ipy.diagnose.gpu_state import (
    GpuState,
    describe,
    nvml_target,
    reading,
    reason_for,
    snapshot,
)

A100 = GpuState(
    device_index=0,
    nvml_index=0,
    name="NVIDIA A100-SXM4-40GB",
    process_bytes=int(1.25 * 2**30),
    used_bytes=int(9.5 * 2**30),
    total_bytes=40 * 2**30,
    other_processes=2,
    ecc_volatile_uncorrected=0,
    ecc_aggregate_uncorrected=0,
    retired_pages=0,
    retired_pending=False,
    remapped_rows_uncorrectable=0,
    remap_pending=False,
    remap_failed=False,
)
RTX = GpuState(
    device_index=0,
    nvml_index=0,
    name="NVIDIA GeForce RTX 3090",
    used_bytes=5 * 2**30,
    total_bytes=24 * 2**30,
    other_processes=0,
)


def _nvml_library_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_without_an_nvidia_driver_the_state_is_one_line_saying_why():
    line = describe(snapshot(0))
    if _nvml_library_present():  # a lent GPU machine: the real state instead (the GPU suite checks its content)
        assert "\n" not in line and not line.startswith("GPU state unavailable")
    else:
        assert line == "GPU state unavailable: NVML library not found (no NVIDIA driver on this machine)"
        assert describe(snapshot(None)) == line
        assert snapshot(None).unavailable_reason == "NVML library not found (no NVIDIA driver on this machine)"


def test_without_nvidia_ml_py_the_note_says_which_package_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # what `import pynvml` meets when it is not installed
    assert describe(snapshot(0)) == "GPU state unavailable: nvidia-ml-py is not installed (pip install nvidia-ml-py)"


def test_a_device_hidden_by_cuda_visible_devices_is_named_in_the_note():
    state = snapshot(1, environ={"CUDA_VISIBLE_DEVICES": "3"})
    assert state.unavailable_reason == "CUDA device 1 is not among CUDA_VISIBLE_DEVICES=3"
    assert describe(state) == "GPU state unavailable: CUDA device 1 is not among CUDA_VISIBLE_DEVICES=3"


def test_a_bug_while_reading_still_gives_one_line(monkeypatch):
    def broken(device_index, environ):
        raise RuntimeError("boom")

    monkeypatch.setattr(gpu_state, "_snapshot", broken)
    assert snapshot(0).unavailable_reason == "NVML error: RuntimeError: boom"
    assert describe(snapshot(0)) == "GPU state unavailable: NVML error: RuntimeError: boom"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "NVML library not found (no NVIDIA driver on this machine)"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "the NVIDIA driver is not loaded"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no permission to query the GPU through NVML"),
        (
            pynvml.NVML_ERROR_GPU_IS_LOST,
            "the GPU has fallen off the bus (NVML: GPU is lost): a hardware or driver fault, not your code",
        ),
        (
            pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            "the NVIDIA driver was updated without a reboot (NVML and driver versions differ)",
        ),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "the NVIDIA driver is older than this nvidia-ml-py"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVML error: Unknown Error"),
    ],
)
def test_each_nvml_error_becomes_a_reason_in_words(code, expected):
    assert reason_for(pynvml.NVMLError(code)) == expected


def test_an_unknown_gpu_index_names_the_target():
    assert reason_for(pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT), 5) == "NVML has no GPU 5"
    assert reason_for(pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND), "GPU-12ab") == "NVML has no GPU GPU-12ab"


@pytest.mark.parametrize(
    ("index", "visible", "expected"),
    [
        (None, None, 0),
        (1, None, 1),
        (0, "2,3", 2),
        (1, " 2, 3 ", 3),
        (0, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,1", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"),
        (1, "GPU-8932f937,1", 1),
        (0, "MIG-4b2c8a6e-0d6a-5d3b-9c1f-7e2d4a6b8c0d", "MIG-4b2c8a6e-0d6a-5d3b-9c1f-7e2d4a6b8c0d"),
    ],
)
def test_cuda_indices_map_to_nvml_through_cuda_visible_devices(index, visible, expected):
    assert nvml_target(index, visible) == expected


@pytest.mark.parametrize(("index", "visible"), [(1, "0,-1,2"), (0, ""), (2, "0,1"), (1, "0,abc,2")])
def test_cuda_stops_reading_cuda_visible_devices_at_the_first_invalid_entry(index, visible):
    with pytest.raises(ValueError, match=f"CUDA device {index} is not among CUDA_VISIBLE_DEVICES={visible}"):
        nvml_target(index, visible)


def test_clean_counters_read_as_a_software_fault():
    assert reading(A100) == (
        "software fault in your code, not the hardware: the GPU reports no uncorrectable memory errors"
    )


def test_uncorrectable_errors_since_the_driver_loaded_read_as_possible_hardware():
    state = replace(A100, ecc_volatile_uncorrected=3, ecc_aggregate_uncorrected=3)
    assert reading(state) == (
        "possible hardware fault: 3 uncorrectable ECC errors since the driver loaded; tell "
        "whoever runs this machine (`nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`)"
    )


def test_pending_retirement_and_failed_remapping_read_as_possible_hardware():
    state = replace(A100, ecc_volatile_uncorrected=1, retired_pending=True, remap_pending=True, remap_failed=True)
    assert reading(state) == (
        "possible hardware fault: 1 uncorrectable ECC error since the driver loaded, a page retirement is pending "
        "(needs a GPU reset), a row remapping is pending (needs a GPU reset), a row remapping failed; tell whoever "
        "runs this machine (`nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`)"
    )


def test_old_errors_already_remapped_still_read_as_software():
    state = replace(A100, ecc_aggregate_uncorrected=2, remapped_rows_uncorrectable=2)
    assert reading(state) == (
        "software fault in your code, not the hardware: no uncorrectable memory errors since "
        "the driver loaded (2 uncorrectable errors over the GPU's lifetime, already retired "
        "or remapped)"
    )


def test_a_gpu_without_ecc_reads_as_most_likely_software():
    assert reading(RTX) == "most likely a software fault in your code: this GPU does not report memory-error counters"


def test_a_datacenter_gpu_is_described_in_one_line():
    assert describe(A100) == (
        "NVIDIA A100-SXM4-40GB (GPU 0); this process holds 1.2 GiB of 40.0 GiB; 2 other processes on the device; "
        "ECC uncorrectable 0 since driver load, 0 lifetime, retired pages 0, remapped rows 0; reading: software "
        "fault in your code, not the hardware: the GPU reports no uncorrectable memory errors"
    )


def test_a_consumer_gpu_in_a_container_is_described_without_its_missing_counters():
    state = replace(
        RTX,
        device_index=1,
        nvml_index=3,
        other_processes=1,
        process_bytes=None,
        note="CUDA may number these GPUs differently from NVML: set CUDA_DEVICE_ORDER=PCI_BUS_ID",
    )
    assert describe(state) == (
        "NVIDIA GeForce RTX 3090 (GPU 1, NVML index 3); 5.0 GiB of 24.0 GiB in use; 1 other process on the device; "
        "no ECC counters; CUDA may number these GPUs differently from NVML: set CUDA_DEVICE_ORDER=PCI_BUS_ID; "
        "reading: most likely a software fault in your code: this GPU does not report memory-error counters"
    )


def test_a_small_allocation_is_shown_in_mib_and_no_neighbours_say_so():
    state = replace(RTX, process_bytes=300 * 2**20)
    assert describe(state).startswith(
        "NVIDIA GeForce RTX 3090 (GPU 0); this process holds 300 MiB of 24.0 GiB; no other processes; no ECC counters; "
    )
