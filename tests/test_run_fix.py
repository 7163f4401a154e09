"""The runner's patch (#26): a unified diff against the script (or the user's module) that defined the culprit,
shown after the report, carried by --report-json, written into the file only with --apply-fix. Real
subprocesses; the failures are PyTorch's own CPU errors (the CPU twins of the device asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import kernel_env

NETS = """
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)  # three classes

    def forward(self, x):
        return self.head(self.body(x))
"""
BCE = """
import torch, torch.nn as nn
from nets import Net

torch.manual_seed(0)
model = Net()
criterion = nn.BCELoss()
loss = criterion(model(torch.randn(6, 4)), torch.ones(6, 3))
print("trained")
"""
ROWS = """
import torch, torch.nn.functional as F
from nets import Net

torch.manual_seed(0)
model = Net()
y = torch.arange(40) % 3
y[[5, 17]] = -3  # two bad rows
data = torch.utils.data.TensorDataset(torch.randn(40, 4), y)
loader = torch.utils.data.DataLoader(data, batch_size=40)
for xb, yb in loader:
    loss = F.cross_entropy(model(xb), yb)
print("trained")
"""
WIDER = """
import torch, torch.nn.functional as F
from nets import Net

model = Net()
loss = F.cross_entropy(model(torch.randn(4, 4)), torch.tensor([0, 3, 1, 2]))
"""


def files(tmp_path: Path, script: str) -> Path:
    (tmp_path / "nets.py").write_text(textwrap.dedent(NETS))
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(script))
    return path


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cudaassert_ipy", *args],
        cwd=tmp_path,
        env=kernel_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_safe_patch_is_shown_as_a_diff_against_the_script_and_carried_by_report_json(tmp_path):
    script = files(tmp_path, BCE)
    before = script.read_text()
    result = run(tmp_path, "--report-json", "r.json", "train.py")
    assert result.returncode == 1
    err = result.stderr
    report_at, fix_at = err.index("Exception: "), err.index("[cudaassert] Proposed fix for `criterion` (safe)")
    assert report_at < fix_at  # after the report
    assert "--- a/train.py\n    +++ b/train.py" in err
    assert "    -criterion = nn.BCELoss()\n    +criterion = nn.BCEWithLogitsLoss()" in err
    assert "[cudaassert] The patch is shown, not applied: rerun with --apply-fix to write it into train.py." in err
    assert script.read_text() == before
    fix = json.loads((tmp_path / "r.json").read_text())["fix"]
    assert (fix["safety"], fix["path"], fix["default"]) == ("safe", "train.py", 0)
    assert "+criterion = nn.BCEWithLogitsLoss()" in fix["diff"] and "logits" in fix["why"]
    assert [a["key"] for a in fix["alternatives"]] == ["bce_logits"]
    assert fix["alternatives"][0]["evidence"].startswith("the loss got values from")


def test_apply_fix_writes_the_patch_the_data_decides_for_and_the_script_then_runs(tmp_path):
    script = files(tmp_path, ROWS)
    result = run(tmp_path, "--apply-fix", "train.py")
    assert "[1] (the data decides for this one) drop the 2 bad row(s) of `data` (5, 17)" in result.stderr
    assert "[cudaassert] Patched train.py (drop the 2 bad row(s)" in result.stderr
    assert (
        "data = torch.utils.data.Subset(data, [i for i in range(len(data)) if i not in {5, 17}])" in script.read_text()
    )
    again = run(tmp_path, "train.py")
    assert (again.returncode, again.stdout, again.stderr) == (0, "trained\n", "")


def test_a_head_written_in_the_users_module_gets_a_patch_of_that_module_that_is_not_applied_undecided(tmp_path):
    files(tmp_path, WIDER)
    nets = (tmp_path / "nets.py").read_text()
    result = run(tmp_path, "--apply-fix", "--report-json", "r.json", "train.py")
    err = result.stderr
    assert "[1] set out_features=4" in err
    assert "--- a/nets.py" in err and "    +        self.head = nn.Linear(8, 4)  # three classes" in err
    assert "The data does not decide: nothing is applied until you choose one." in err
    assert "[cudaassert] --apply-fix: nothing was written (the data does not decide" in err
    assert (tmp_path / "nets.py").read_text() == nets
    fix = json.loads((tmp_path / "r.json").read_text())["fix"]
    assert (fix["safety"], fix["default"], fix["path"]) == ("decision", None, None)
    assert fix["alternatives"][0]["path"] == "nets.py"


def test_an_ordinary_error_gets_no_patch_and_stays_as_python_prints_it(tmp_path):
    files(tmp_path, "from nets import Net\nNet()(1)\n")
    plain = subprocess.run(
        [sys.executable, "train.py"], cwd=tmp_path, env=kernel_env(), capture_output=True, text=True, timeout=120
    )
    ours = run(tmp_path, "--apply-fix", "train.py")
    assert ours.stderr == plain.stderr and "cudaassert" not in ours.stderr
