"""The STaR loop under ``accelerate launch``: ranks, barriers, gathering, and one writer.

Every rank runs the loop.  Generation is sharded (rank r takes prompts r, r+W, r+2W, ...) and the
shards are gathered on every rank (``torch.distributed.all_gather_object``), so each rank holds the
whole result; only rank 0 writes files, and the others wait at a barrier where they need them.
With one process (no ``WORLD_SIZE``) all of this is a no-op.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def _dist() -> Any | None:
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist
    return None


def init() -> None:
    """Join the process group ``accelerate launch`` set up the environment for (gloo on CPU, NCCL on GPU)."""
    if world_size() > 1 and _dist() is None:
        from accelerate import PartialState

        PartialState()


def barrier() -> None:
    dist = _dist()
    if dist is not None:
        dist.barrier()


def all_gather(obj: Any) -> list[Any]:
    """Every rank's ``obj``, in rank order, on every rank (``[obj]`` with one process)."""
    dist = _dist()
    if dist is None:
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out
