"""torch.distributed for the Trainer: join the process group torchrun describes, reduce metrics, share objects.

Under `torchrun --nproc_per_node N` the environment names RANK, WORLD_SIZE and LOCAL_RANK; we join with NCCL on
GPUs and gloo on CPUs. Outside torchrun everything here is a no-op for a single process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistributedContext:
    """This process' place in the job: rank, world size, local rank (GPU index) and whether it opened the group."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owns_group: bool = False

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that writes checkpoints, logs and results."""
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """True when the environment describes a job of more than one process (torchrun sets WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def init_distributed(device_type: str = "cpu") -> DistributedContext:
    """Join (or reuse) the process group torchrun describes: NCCL for CUDA, gloo otherwise; single process otherwise."""
    if dist.is_available() and dist.is_initialized():
        return DistributedContext(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))
    if not launched_by_torchrun():
        return DistributedContext()
    if not dist.is_available():
        raise RuntimeError("WORLD_SIZE > 1 but this PyTorch build has no torch.distributed support.")
    backend = "nccl" if device_type == "cuda" else "gloo"
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device_type == "cuda":
        torch.cuda.set_device(local_rank)
    dist.init_process_group(backend=backend)
    return DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank, owns_group=True)


def close_distributed(context: DistributedContext) -> None:
    """Leave the process group if this context opened it."""
    if context.owns_group and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_sum(values: torch.Tensor, context: DistributedContext) -> torch.Tensor:
    """Sum a tensor over all processes (in place); identity for one process."""
    if context.is_distributed:
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
    return values


def largest(value: int, context: DistributedContext, device: torch.device) -> int:
    """The largest of the processes' values, on every process (e.g. the signal one of them received)."""
    if not context.is_distributed:
        return value
    box = torch.tensor([float(value)], device=device)
    dist.all_reduce(box, op=dist.ReduceOp.MAX)
    return int(box.item())


def any_process(flag: bool, context: DistributedContext, device: torch.device) -> bool:
    """True on every process when it is True on any (so all stop at the same step)."""
    return largest(int(flag), context, device) > 0


def broadcast_object(value: Any, context: DistributedContext) -> Any:
    """Rank 0's value on every process (e.g. a tokenizer trained once)."""
    if not context.is_distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather_objects(value: Any, context: DistributedContext) -> list[Any]:
    """Every process' value, in rank order, on every process."""
    if not context.is_distributed:
        return [value]
    out: list[Any] = [None] * context.world_size
    dist.all_gather_object(out, value)
    return out


def barrier(context: DistributedContext) -> None:
    """Wait for every process."""
    if context.is_distributed:
        dist.barrier()
