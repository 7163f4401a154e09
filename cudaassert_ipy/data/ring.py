"""A rank's last batches on disk, for a rank that dies without running Python (SIGABRT, SIGKILL).

Why: a rank killed by its NCCL watchdog (``Process group watchdog thread terminated with exception: CUDA
error: device-side assert triggered``, then ``abort()``) or by Lightning's DDP observer (SIGKILL) runs no
excepthook, no ``atexit``: what the report needs must be on disk before it dies. Each rank under a runner
maps one small file (``MAP_SHARED``: the page cache keeps what was written when the process dies) and the
bookmark writes one slot per yielded batch: the epoch, the batch number and the sample indices as text.
The runner that launched the job reads the files when a rank failed (:mod:`cudaassert_ipy.run.ranks`).

Layout: a 64-byte header (magic, pid, rank, local rank, state, batches written) and SLOTS slots of SLOT
bytes (the data's length and kind, the epoch, the batch number and how far its framework fetches ahead, then the
indices: int64s when they are ints,
else their ``ascii()`` text). A slot is written before the count that makes it
visible, so a process killed mid-write leaves at most one slot unread, never a torn one read.
"""

from __future__ import annotations

import mmap
import os
import struct
from array import array
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from cudaassert_ipy.capture import job_folder

__all__ = ["ENV", "EXITED", "RUNNING", "LazyRing", "Ring", "RingData", "rank_from_env", "read"]

ENV = job_folder.ENV  # set by the runner for its children: where each rank maps its ring
MAGIC = b"CARING1\n"
SLOTS = 8
SLOT = 1024
_HEADER = struct.Struct("<8sqqqqQ")  # magic, pid, rank, local rank, state, batches written
HEADER = 64
RUNNING, EXITED = 0, 1  # EXITED: the process left through Python (an excepthook, atexit): not a silent death
_STATE_AT = 32
_COUNT = struct.Struct("<Q")
_COUNT_AT = _HEADER.size - _COUNT.size
_SLOT = struct.Struct("<IIqqHH")  # data length, kind, epoch, batch, batches fetched ahead (at least, at most)
INTS, TEXT, CUT = 1, 2, 0x100  # CUT: more indices than a slot holds; the first ones are kept
_ROOM = SLOT - _SLOT.size
_MAX_INTS = _ROOM // 8
_PACKERS: dict[int, struct.Struct] = {}  # the slot's header and n int64s, by n: a batch size or two in a run


def _packer(n: int) -> struct.Struct:
    if len(_PACKERS) > 64:  # uneven batch sizes (a custom batch sampler): keep the cache small
        _PACKERS.clear()
    packer = _PACKERS[n] = struct.Struct(f"<IIqqHH{min(n, _MAX_INTS)}q")
    return packer


class Ring:
    """One process's ring; ``write`` is called once per yielded batch (~1 us)."""

    def __init__(self, folder: str, rank: int, local_rank: int) -> None:
        self.path = job_folder.ring_path(folder, rank, os.getpid())
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, HEADER + SLOTS * SLOT)
            self.mm: Any = mmap.mmap(fd, HEADER + SLOTS * SLOT)
        finally:
            os.close(fd)
        _HEADER.pack_into(self.mm, 0, MAGIC, os.getpid(), rank, local_rank, RUNNING, 0)
        self.count = 0

    def write(self, epoch: int, batch: int, indices: Any, low: int = 0, high: int = 0) -> None:
        """One yielded batch; ``low``/``high``: how many batches its framework fetches beyond the one it processes."""
        mm, at = self.mm, HEADER + (self.count % SLOTS) * SLOT
        if mm is None:
            raise ValueError("the ring is closed")
        try:  # a list of ints from the sampler: one C call, straight into the map (text costs 3x as much)
            n = len(indices)
            packer = _PACKERS.get(n) or _packer(n)
            if n <= _MAX_INTS:
                packer.pack_into(mm, at, 8 * n, INTS, epoch, batch, low, high, *indices)
            else:
                packer.pack_into(mm, at, 8 * _MAX_INTS, INTS | CUT, epoch, batch, low, high, *indices[:_MAX_INTS])
        except (TypeError, struct.error):  # string keys, None (an IterableDataset): as text
            data, kind = ascii(indices).encode(), TEXT
            if len(data) > _ROOM:
                data, kind = data[:_ROOM], kind | CUT
            _SLOT.pack_into(mm, at, len(data), kind, epoch, batch, low, high)
            mm[at + _SLOT.size : at + _SLOT.size + len(data)] = data
        self.count += 1
        _COUNT.pack_into(mm, _COUNT_AT, self.count)

    def close(self) -> None:
        """The process leaves through Python: its own report (if any) says what happened."""
        mm, self.mm = self.mm, None
        if mm is not None:
            struct.pack_into("<q", mm, _STATE_AT, EXITED)
            mm.close()


def rank_from_env(env: Mapping[str, str]) -> tuple[int, int] | None:
    """(rank, local rank) from torchrun's RANK, or from LOCAL_RANK on one node (Lightning's own DDP launcher sets
    LOCAL_RANK, NODE_RANK and WORLD_SIZE, never RANK); None outside a job."""
    try:
        local = int(env["LOCAL_RANK"]) if "LOCAL_RANK" in env else None
        if "RANK" in env:
            return int(env["RANK"]), local or 0
        if local is not None and env.get("NODE_RANK", "0") == "0":
            return local, local
    except ValueError:
        pass
    return None


class LazyRing:
    """A ring opened at the rank's first batch, not when torch is imported: Lightning's launcher sets rank 0's
    variables (in the runner's own process) only when ``fit`` starts. Nothing is opened outside a job."""

    def __init__(self, folder: str, opened: Callable[[Ring], None]) -> None:
        self.folder, self.opened = folder, opened
        self.ring: Ring | None = None
        self.failed = False

    def write(self, epoch: int, batch: int, indices: Any, low: int = 0, high: int = 0) -> None:
        ring = self.ring
        if ring is None:
            if self.failed:
                return
            ring = self._open()
            if ring is None:
                return
        ring.write(epoch, batch, indices, low, high)

    def _open(self) -> Ring | None:
        ranks = rank_from_env(os.environ)
        if ranks is None:  # not (yet) a rank: asked again at the next batch (two dict lookups)
            return None
        if not os.path.isdir(self.folder):
            self.failed = True
            return None
        try:
            ring = Ring(self.folder, *ranks)
        except (OSError, ValueError):  # no room or no mmap: the rank runs on, its report just lacks the batches
            self.failed = True
            return None
        self.ring = ring
        self.opened(ring)
        return ring

    def close(self) -> None:
        if self.ring is not None:
            self.ring.close()


class RingData(NamedTuple):
    path: str
    pid: int
    rank: int
    local_rank: int
    exited: bool  # False: the process never reached Python's exit (killed, aborted) or still runs
    batches: tuple[tuple[int, int, str], ...]  # (epoch, batch, the indices as text), latest first
    ahead: tuple[int, int] = (0, 0)  # batches its framework had fetched beyond the processed one (latest slot)


def read(path: str) -> RingData | None:
    """A ring file's contents; None when it is not one (or unreadable)."""
    try:
        with open(path, "rb") as fp:
            raw = fp.read(HEADER + SLOTS * SLOT)
        magic, pid, rank, local_rank, state, count = _HEADER.unpack_from(raw, 0)
    except (OSError, struct.error):
        return None
    if magic != MAGIC:
        return None
    batches: list[tuple[int, int, str]] = []
    ahead = (0, 0)
    for n in range(count - 1, max(count - SLOTS, 0) - 1, -1):
        at = HEADER + (n % SLOTS) * SLOT
        size, kind, epoch, batch, low, high = _SLOT.unpack_from(raw, at)
        if not batches:
            ahead = (low, high)
        data = raw[at + _SLOT.size : at + _SLOT.size + min(size, _ROOM)]
        if kind & ~CUT == INTS and len(data) % 8 == 0:
            ints = array("q")
            ints.frombytes(data)
            text = str(ints.tolist())
            text = text[:-1] + ", ...]" if kind & CUT else text
        elif kind & ~CUT == TEXT:
            text = data.decode("ascii", "replace") + (" ..." if kind & CUT else "")
        else:
            continue
        batches.append((epoch, batch, text))
    return RingData(path, pid, rank, local_rank, state == EXITED, tuple(batches), ahead)
