"""The GPU suite on a lent GPU machine, which has torch but can fetch nothing: its wheels, and its summary.

    python scripts/gpu_lent.py lock             # resolve the pins again (.ci/gpu-wheels.txt, .ci/gpu-machine.txt)
    python scripts/gpu_lent.py download DIR     # exactly the pinned wheels into DIR (hash-checked), nothing else
    python scripts/gpu_lent.py size DIR         # the working tree plus DIR against the device call's 64 MiB
    python scripts/gpu_lent.py call             # the device call, as JSON
    python scripts/gpu_lent.py verify JSON      # (there) every pin at its version, what the machine holds, the GPU
    python scripts/gpu_lent.py summary OUT ...  # (there) gpu-summary.json under OUT, and a short table

The lent machine's python3 is Python 3.12 on manylinux x86-64 with the packages of .ci/gpu-image-packages.txt.
The suite's needs (NEEDS, resolved with their dependencies for that platform) split in two: what the image lacks
is carried as wheels (.ci/gpu-wheels.txt: pinned, with hashes), and what it holds is named with the version
resolved here (.ci/gpu-machine.txt), which the CPU dry run installs so that it holds what the machine holds.
torch is not resolved: the machine's own is used, and the dry run reuses the compat stage's.
Standard library only: it runs with whichever Python has pip.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARRIED = ROOT / ".ci" / "gpu-wheels.txt"
MACHINE = ROOT / ".ci" / "gpu-machine.txt"
IMAGE = ROOT / ".ci" / "gpu-image-packages.txt"
# the project's own dependencies but torch, the test helpers tests/gpu uses (kernels, a Jupyter server and its
# websocket), and the runner of the suite (pytest, a timeout per case, workers)
NEEDS = (
    "ipython",
    "traitlets",
    "ipywidgets",
    "nvidia-ml-py",
    "cloudpickle",
    "numpy",
    "ipykernel",
    "jupyter_client",
    "jupyter_server",
    "websocket-client",
    "pytest",
    "pytest-timeout",
    "pytest-xdist",
    "hypothesis",
)
PLATFORM = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"] + [
    a
    for p in (
        "manylinux_2_28_x86_64",
        "manylinux_2_27_x86_64",
        "manylinux_2_26_x86_64",
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux_2_12_x86_64",
        "manylinux2010_x86_64",
        "manylinux_2_5_x86_64",
        "manylinux1_x86_64",
    )
    for a in ("--platform", p)
]
LIMIT_MIB = 64  # what travels with a device call: the working tree and the carried paths together
BUDGET_MIB = 48  # room to spare under the limit, for the tree to grow between two runs of this script
DEVICE_CALL = {"command": "bash scripts/gpu-tests.sh --device", "carry": [".gpu-wheels"], "timeout_s": 540}
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s;]+)")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (version, wheel file name) of a lock file (the file name is the line's trailing comment)."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _PIN.match(line)
        if m:
            out[norm(m["name"])] = (m["version"], line.rsplit("# ", 1)[-1].strip() if "# " in line else "")
    return out


def pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    noise = ("WARNING: Location ", "DEPRECATION:")  # local index entries this machine lacks; pip's own notices
    sys.stderr.write("".join(line + "\n" for line in proc.stderr.splitlines() if not line.startswith(noise)))
    if proc.returncode:
        sys.exit(f"pip {args[0]} failed (exit {proc.returncode})")


def lock() -> None:
    image = {norm(n) for n in IMAGE.read_text(encoding="utf-8").split() if not n.startswith("#")}
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        pip(
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            *PLATFORM,
            "--target",
            str(Path(tmp) / "t"),
            *NEEDS,
        )
        resolved = json.loads(report.read_text(encoding="utf-8"))["install"]
    carried, held = [], []
    for item in sorted(resolved, key=lambda i: norm(i["metadata"]["name"])):
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if norm(name) in image:
            held.append(f"{name}=={version}")
        else:
            info = item["download_info"]
            digest = info["archive_info"]["hashes"]["sha256"]
            carried.append(f"{name}=={version} --hash=sha256:{digest}  # {info['url'].rsplit('/', 1)[-1]}")
    head = "# Written by `python scripts/gpu_lent.py lock` (scripts/gpu-prepare.sh --lock): do not edit.\n"
    CARRIED.write_text(
        head + "# What the GPU suite needs and the lent GPU machine lacks: carried there as wheels "
        "(Python 3.12, manylinux x86-64).\n" + "\n".join(carried) + "\n",
        encoding="utf-8",
    )
    MACHINE.write_text(
        head + "# What the GPU suite needs and the lent GPU machine already holds (its versions may "
        "differ): the CPU dry run\n# installs these beside torch, so that it holds what the machine "
        "holds.\n" + "\n".join(held) + "\n",
        encoding="utf-8",
    )
    print(
        f"{len(carried)} wheels to carry ({CARRIED.relative_to(ROOT)}), {len(held)} held there "
        f"({MACHINE.relative_to(ROOT)})"
    )


def download(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    want = {file for _, file in pins(CARRIED).values()}
    for stale in folder.iterdir():  # one version of each: two would stop the install there
        if stale.name not in want:
            stale.unlink()
    if not all((folder / f).exists() for f in want):
        pip("download", "--quiet", "--no-deps", *PLATFORM, "--dest", str(folder), "-r", str(CARRIED))
    missing = sorted(f for f in want if not (folder / f).exists())
    extra = sorted(p.name for p in folder.iterdir() if p.name not in want)
    if missing or extra:
        sys.exit(f"{folder.name} does not hold exactly the pinned wheels: missing {missing}, unexpected {extra}")
    print(f"{len(want)} pinned wheels in {folder.relative_to(ROOT)}/")


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def size(folder: Path) -> None:
    rel = str(folder.relative_to(ROOT))
    if subprocess.run(["git", "check-ignore", "-q", rel], cwd=ROOT).returncode != 0:
        sys.exit(f"{rel} is not ignored by git: a carried path must be (add it to .gitignore)")
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    tree = sum((ROOT / f).stat().st_size for f in listed if f and (ROOT / f).is_file())
    carried = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    total = tree + carried
    print(
        f"travels: working tree {mib(tree)} + {rel}/ {mib(carried)} = {mib(total)} "
        f"(limit {LIMIT_MIB} MiB; this script allows {BUDGET_MIB} MiB)"
    )
    if total > BUDGET_MIB * 2**20:
        sys.exit(f"too large: {mib(total)} > {BUDGET_MIB} MiB")


def verify(dest: Path) -> None:
    """There (or in the dry run), with the carried wheels on PYTHONPATH: each pin at its version, what the machine
    holds, the device, driver and versions; printed, and written to ``dest`` as JSON."""
    from importlib.metadata import PackageNotFoundError, version

    def have(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    problems = [f"carried {n}: want {v}, found {have(n)}" for n, (v, _) in pins(CARRIED).items() if have(n) != v]
    held = {n: have(n) for n in pins(MACHINE)}
    problems += [f"the machine lacks {n} (.ci/gpu-machine.txt names it)" for n, v in held.items() if v is None]
    import torch

    device = os.environ.get("CUDAASSERT_GPU_TEST_DEVICE", "cuda")
    env: dict[str, object] = {
        "device": device,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        **{
            n: have(n)
            for n in (
                "ipython",
                "ipykernel",
                "ipywidgets",
                "jupyter_client",
                "jupyter_server",
                "pytest",
                "pytest-timeout",
                "pytest-xdist",
                "nvidia-ml-py",
            )
        },
    }
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        )
        env["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
        env["driver"] = env["nvidia_smi"].split(", ")[1] if env["nvidia_smi"].count(", ") >= 2 else None
    elif device == "cuda":
        problems.append(
            f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no CUDA device: check "
            "nvidia-smi, the driver and CUDA_VISIBLE_DEVICES"
        )
    env["held"], env["problems"] = held, problems
    for key in (
        "gpu",
        "nvidia_smi",
        "python",
        "torch",
        "torch_cuda",
        "ipython",
        "ipykernel",
        "ipywidgets",
        "jupyter_server",
        "pytest",
        "pytest-timeout",
        "pytest-xdist",
    ):
        if key in env:
            print(f"  {key}: {env[key]}")
    print("  held there:", ", ".join(f"{n} {v}" for n, v in held.items()))
    for line in problems:
        print("  PROBLEM:", line)
    dest.write_text(json.dumps(env, indent=1), encoding="utf-8")
    sys.exit(1 if problems else 0)


def summary(out: Path, tests_rc: int, bench_rc: int, seconds: int) -> None:
    """gpu-summary.json under ``out``: the environment, each case (outcome, seconds, the diagnosed cause and whether
    it is the expected one), the benchmark's table; then a short table, printed last."""

    def load(name: str, default: object) -> object:
        path = out / name
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else default

    cases = load("cases.json", [])
    assert isinstance(cases, list)
    bench = (out / "bench.txt").read_text(encoding="utf-8").splitlines() if (out / "bench.txt").exists() else []
    counts: dict[str, int] = {}
    for c in cases:
        counts[c["outcome"]] = counts.get(c["outcome"], 0) + 1
    result = {
        "env": load("env.json", {}),
        "seconds": seconds,
        "tests_rc": tests_rc,
        "bench_rc": bench_rc,
        "counts": counts,
        "cases": cases,
        "benchmark": [line for line in bench if line.startswith("|")],
    }
    (out / "gpu-summary.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    for name in ("cases.json", "env.json", "bench.txt"):  # all of it is in the summary now
        (out / name).unlink(missing_ok=True)
    for c in cases:
        if "cause_id" in c:
            verdict = {True: "ok", False: "MISMATCH", None: "no twin"}[c.get("matched")]
            print(f"  {verdict:8} {c['case']}: {c['cause_id']}")
    for c in cases:
        if c["outcome"] != "passed":
            print(f"  {c['outcome']:8} {c['case']}: {c.get('message', '')[:300]}")
    print(
        f"=== summary ({out / 'gpu-summary.json'}): {seconds}s; tests exit {tests_rc}, benchmark exit {bench_rc}; "
        + ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    )


def main() -> None:
    verb, *rest = sys.argv[1:] or ["?"]
    if verb == "lock":
        lock()
    elif verb in ("download", "size") and len(rest) == 1:
        (download if verb == "download" else size)((ROOT / rest[0]).resolve())
    elif verb == "verify" and len(rest) == 1:
        verify(Path(rest[0]))
    elif verb == "summary" and len(rest) == 4:
        summary(Path(rest[0]), int(rest[1]), int(rest[2]), int(rest[3]))
    elif verb == "call":
        print(json.dumps(DEVICE_CALL))
    else:
        sys.exit(
            "usage: python scripts/gpu_lent.py lock | download DIR | size DIR | call | verify JSON "
            "| summary OUT TESTS_RC BENCH_RC SECONDS"
        )


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
