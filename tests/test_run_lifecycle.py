"""The runner gives back what it took, as the notebook's unload does (tests/test_lifecycle.py): after the Guard's
``close`` the fds, hooks, patches, threads, helper processes, environment and job folder are as they were.

Also: a ``--validators`` stop under the runner names the dataset sample, as it does in the notebook.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from helpers import TESTS, kernel_env

PY = sys.executable
SCRIPT = """
import os
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
class Birds(Dataset):
    def __init__(self):
        self.y = torch.arange(400) % 195
        self.y[41] = 195
    def __len__(self):
        return 400
    def __getitem__(self, i):
        return torch.randn(8), self.y[i]
train_ds = Birds()
model = nn.Linear(8, 195)
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(0))
os.environ["LOCAL_RANK"] = "0"  # as Lightning's launcher sets rank 0's: the rank's ring and the runner's tail open
try:
    for i, (images, targets) in enumerate(train_loader):
        loss = F.cross_entropy(model(images), targets.clone())
finally:
    del os.environ["LOCAL_RANK"]
    folder = os.environ["CUDAASSERT_RING_DIR"]
    with open(os.environ["FOLDER_OUT"], "w") as f:
        f.write(folder + "\\n" + " ".join(sorted(n.split("-")[0] for n in os.listdir(folder))))
"""
# batch 1 of the seeded shuffle holds sample 41 at position 28 (as in tests/test_bookmark_validators.py)
LINE = "From the DataLoader: target[28]=195 → `train_ds[41]` (batch 1 of epoch 0 from `train_loader`)."

FOOTPRINT = r"""
import atexit, json, os, sys, threading
import torch, torch.utils.data.dataloader as dl
# what registers a process event when it is imported, imported first: only what the run starts is compared
import cudaassert_ipy.capture.fd_tap, cudaassert_ipy.capture.rescue, cudaassert_ipy.checks.mode
import cudaassert_ipy.data.bookmark, cudaassert_ipy.data.sample_lookup, cudaassert_ipy.run.watcher
from cudaassert_ipy.checks.sample_naming import SAMPLE_NAMING
from cudaassert_ipy.run.options import RunOptions
from cudaassert_ipy.run.session import execute
from cudaassert_ipy.run.target import Target

# atexit's count of callbacks does not drop on unregister (CPython empties the slot): keep our own list of what
# was registered and not unregistered, through the real functions
LIVE = []
_register, _unregister = atexit.register, atexit.unregister

def register(func, *args, **kwargs):
    LIVE.append(func)
    return _register(func, *args, **kwargs)

def unregister(func):
    LIVE[:] = [f for f in LIVE if f != func]
    return _unregister(func)

atexit.register, atexit.unregister = register, unregister

def children():
    found = set()
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            found |= set(f.read().split())
    return sorted(found)

def snapshot():
    return {
        "fds": {fd: list(os.fstat(fd)[:3]) for fd in (0, 1, 2)},
        "open_fds": sorted(os.listdir("/proc/self/fd")),
        "excepthook": repr(sys.excepthook),
        "meta_path": [repr(f) for f in sys.meta_path],
        "atexit": [repr(f) for f in LIVE],
        "threads": sorted(t.name for t in threading.enumerate()),
        "children": children(),
        "env": dict(os.environ),
        "dataloader": [repr(dl._BaseDataLoaderIter.__next__), repr(dl._MultiProcessingDataLoaderIter._next_index)],
        "function_modes": torch._C._len_torch_function_stack(),
        "sample_lookup": SAMPLE_NAMING.current() is None,
    }

script, report = sys.argv[1:3]
before = snapshot()
options = RunOptions(validators=True, blocking=True, report_json=report)
code, outcome = execute(options, Target(script, None, ()))
after = snapshot()
folder, names = open(os.environ["FOLDER_OUT"]).read().split("\n")
print(json.dumps({"code": code, "kind": outcome.diagnosis and outcome.diagnosis.kind, "names": names,
                  "folder_left": os.path.exists(folder), "diff": {k: (before[k], after[k]) for k in before
                                                                    if before[k] != after[k]}}))
"""


def test_close_gives_back_the_fds_hooks_patches_threads_helpers_environment_and_job_folder(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = kernel_env(FOLDER_OUT=str(tmp_path / "folder.txt"))
    for key in ("CUDAASSERT_RING_DIR", "RANK", "LOCAL_RANK", "CUDAASSERT_RUN", "CUDA_LAUNCH_BLOCKING"):
        env.pop(key, None)
    out = subprocess.run(
        [PY, "-c", FOOTPRINT, str(script), str(tmp_path / "report.json")],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=TESTS,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert LINE in out.stderr  # the validator's stop names the sample: the runner installed the lookup
    assert (result["code"], result["kind"]) == (1, "validator")
    assert result["names"] == "rank runner.stderr"  # the rank's ring and the runner's stderr tail were opened
    assert json.loads((tmp_path / "report.json").read_text())["exit_code"] == 1
    assert not result["folder_left"]
    assert result["diff"] == {}


def test_a_validators_stop_under_the_runner_names_the_sample(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = subprocess.run(
        [PY, "-m", "cudaassert_ipy", "--validators", str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        env=kernel_env(FOLDER_OUT=str(tmp_path / "folder.txt")),
        cwd=tmp_path,
    )
    assert out.returncode == 1, out.stderr[-3000:]
    assert "ValidationIndexError" in out.stderr and LINE in out.stderr, out.stderr[-3000:]
