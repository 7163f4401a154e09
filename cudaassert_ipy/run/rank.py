"""Which process of a job this is: torchrun's rank variables and the host, for the report's first line.

torchrun (torch.distributed.elastic) sets RANK, LOCAL_RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID in
every worker; Accelerate and Lightning launch through it or set the same names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from cudaassert_ipy.base.wording import PREFIX

__all__ = ["RANK_HEADER", "RankInfo"]

RANK_HEADER = "{prefix} rank {rank} (local_rank {local_rank}, host {host}) failed:"


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class RankInfo(NamedTuple):
    rank: int | None
    local_rank: int | None
    world_size: int | None
    torchrun: bool  # launched by torch.distributed.elastic (it reads TORCHELASTIC_ERROR_FILE)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RankInfo:
        env = os.environ if environ is None else environ
        return cls(
            _int(env.get("RANK")),
            _int(env.get("LOCAL_RANK")),
            _int(env.get("WORLD_SIZE")),
            "TORCHELASTIC_RUN_ID" in env,
        )

    @property
    def host(self) -> str:
        import socket

        return socket.gethostname()

    @property
    def distributed(self) -> bool:
        """One of several processes: a failed one must exit at once, not wait in a collective."""
        return self.torchrun or (self.world_size or 1) > 1

    @property
    def is_zero(self) -> bool:
        return not self.rank

    def header(self) -> str | None:
        """The report's first line under torchrun; None for a plain single process."""
        if self.rank is None:
            return None
        return RANK_HEADER.format(
            prefix=PREFIX,
            rank=self.rank,
            host=self.host,
            local_rank=self.local_rank if self.local_rank is not None else "?",
        )

    def as_dict(self) -> dict[str, object]:
        return {"rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size, "host": self.host}
