"""Data-parallel passes on ``torch.distributed``: one process per device, launched by ``torchrun``.

Each rank takes the batches ``b % world_size == rank`` of the single-process order (nothing dropped
or repeated); per-head sums are all-reduced in float64, an evaluation gathers every example's prediction
and loss in the single-process order, so metrics and losses equal one process's; rank 0 writes. Every
collective starts with a status exchange, so a rank that fails inside :func:`guard` makes the others
raise :class:`RankFailed` and nobody writes. Reads ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``; without
:func:`init` nothing communicates. The whole design: docs/DISTRIBUTED.md.
"""
from __future__ import annotations

import contextlib
import datetime
import importlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pruning_core.core.errors import HeadpruneError, UsageError

TORCHRUN_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK")


class RankFailed(HeadpruneError):
    """Another rank failed during a data-parallel pass: this one stops too and writes nothing."""


@dataclass(frozen=True)
class World:
    """This process's place in the group.

    rank: 0 .. size - 1 (rank 0 writes); local_rank: its index on this node (its GPU);
    backend: "gloo" (CPU) or "nccl" (CUDA); devices: every rank's model device, in rank order.
    """

    rank: int
    size: int
    local_rank: int
    backend: str
    devices: tuple[str, ...]

    @property
    def writer(self) -> bool:
        return self.rank == 0

    def describe(self) -> dict:
        """What a result's provenance records."""
        return {"world_size": self.size, "backend": self.backend, "devices": list(self.devices)}


_WORLD: World | None = None


def current() -> World | None:
    """The group this process belongs to, or None (a single process)."""
    return _WORLD


def is_writer() -> bool:
    """True on rank 0 and in a single process: the process that writes files and prints results."""
    return _WORLD is None or _WORLD.writer


def describe(device: str | None = None) -> dict:
    """Provenance of the parallel setup: world size, backend and devices (one process: its device)."""
    if _WORLD is not None:
        return _WORLD.describe()
    return {"world_size": 1, "backend": None, "devices": [device] if device else []}


def launched_by_torchrun() -> bool:
    """Whether ``torchrun`` (or ``torch.distributed.run``) started this process with more than one rank."""
    return all(k in os.environ for k in TORCHRUN_ENV) and int(os.environ["WORLD_SIZE"]) > 1


def _env_int(name: str) -> int:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        raise UsageError(f"--distributed needs the {name} variable that torchrun sets (got "
                         f"{os.environ.get(name)!r}). Start the command with `torchrun --nproc-per-node N -m "
                         "pruning_core ...`, or leave --distributed out.") from None


def local_device(device: str | None = None) -> str:
    """This rank's model device: ``cuda:LOCAL_RANK`` when CUDA is used, else ``cpu``.

    device: what the user asked for (None / "auto" / "cuda": CUDA when present; "cpu").
    """
    want_cuda = device in (None, "auto") and torch.cuda.is_available() or str(device).startswith("cuda")
    if not want_cuda:
        return "cpu"
    if not torch.cuda.is_available():
        raise UsageError(f"--device {device} was asked for but no CUDA GPU is available; use --device cpu.")
    local = _env_int("LOCAL_RANK")
    if local >= torch.cuda.device_count():
        raise UsageError(f"Rank with LOCAL_RANK {local} has no GPU: this node has {torch.cuda.device_count()}. "
                         "Give torchrun --nproc-per-node at most the number of GPUs per node.")
    return f"cuda:{local}"


def init(device: str | None = None, timeout_s: float = 1800.0) -> World:
    """Join the ``torchrun`` group (gloo on CPU, nccl on CUDA); returns this rank's :class:`World`.

    device: the model device asked for (see :func:`local_device`). Idempotent: a second call
    returns the group already joined.
    """
    global _WORLD
    if _WORLD is not None:
        return _WORLD
    import torch.distributed as dist

    missing = [k for k in TORCHRUN_ENV if k not in os.environ]
    if missing:
        raise UsageError(f"--distributed needs the variables torchrun sets ({', '.join(TORCHRUN_ENV)}); "
                         f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set. Start the command "
                         "with `torchrun --nproc-per-node N -m pruning_core ...`, or leave --distributed out.")
    rank, size, local = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK")
    mine = local_device(device)
    backend = "nccl" if mine.startswith("cuda") else "gloo"
    if mine.startswith("cuda"):
        torch.cuda.set_device(torch.device(mine))
    if not dist.is_initialized():
        # torch.distributed.nn.functional binds `group=group.WORLD` as default arguments when first
        # imported (transformers imports it while loading a model). Imported after the group exists,
        # it keeps the group alive past destroy_process_group: gloo's threads then outlive Python and
        # release their last tensors during interpreter teardown, which aborts the process (SIGABRT,
        # "terminate called without an active exception") after the work is done. Imported first, the
        # defaults are None and the group ends with shutdown().
        importlib.import_module("torch.distributed.nn")   # (`import torch.x` here would make `torch` local)
        dist.init_process_group(backend, rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=timeout_s))
    devices: list = [None] * size
    dist.all_gather_object(devices, mine)
    _WORLD = World(rank, size, local, backend, tuple(devices))
    return _WORLD


def shutdown() -> None:
    """Leave the group (after the last pass); a no-op in a single process."""
    global _WORLD
    if _WORLD is None:
        return
    import torch.distributed as dist

    _WORLD = None
    if dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def single_process() -> Iterator[None]:
    """Inside the block this process works alone (no sharding, no collectives); for tests and rank-0 work."""
    global _WORLD
    saved, _WORLD = _WORLD, None
    try:
        yield
    finally:
        _WORLD = saved


# -- sharding --------------------------------------------------------------------------------------

def batch_part() -> tuple[int, int] | None:
    """``(rank, world_size)`` for :meth:`EncodedData.batches`'s ``part``; None in a single process."""
    return None if _WORLD is None else (_WORLD.rank, _WORLD.size)


def batches(data, batch_size: int, device=None) -> tuple[Iterator, int]:
    """This rank's batches of ``data`` (an EncodedData) and how many there are (at least 1, for progress).

    Alone: ``data.batches(batch_size, device=device)`` exactly as before.
    """
    part = batch_part()
    if part is None:
        return data.batches(batch_size, device=device), max(1, data.n_batches(batch_size))
    return data.batches(batch_size, device=device, part=part), max(1, data.n_batches(batch_size, part))




# -- collectives (each starts with a status exchange) ----------------------------------------------

def _exchange(status: str | None, what: str) -> None:
    """Share this rank's status (None = fine, else its error); raise RankFailed if another rank failed."""
    import torch.distributed as dist

    assert _WORLD is not None
    statuses: list = [None] * _WORLD.size
    dist.all_gather_object(statuses, status)
    failed = [(r, s) for r, s in enumerate(statuses) if s is not None and r != _WORLD.rank]
    if failed:
        r, s = failed[0]
        raise RankFailed(f"rank {r} of {_WORLD.size} failed during {what} ({s}); rank {_WORLD.rank} stops too and "
                         "writes nothing. Fix the error on that rank and run the command again.")


def agree(what: str = "the result") -> None:
    """Every rank reached this point without an error (raises RankFailed otherwise); no-op alone."""
    if _WORLD is not None:
        _exchange(None, what)


def sum_tensors(tensors: Sequence[torch.Tensor], what: str) -> list[torch.Tensor]:
    """Element-wise sums over the ranks of ``tensors`` (one all-reduce in float64; shapes as given).

    Each result has its input's dtype and device. Alone: the tensors as they are.
    """
    if _WORLD is None:
        return list(tensors)
    import torch.distributed as dist

    _exchange(None, what)
    comm = torch.device(_WORLD.devices[_WORLD.rank]) if _WORLD.backend == "nccl" else torch.device("cpu")
    flat = torch.cat([t.detach().reshape(-1).to(comm, torch.float64) for t in tensors]) if tensors else \
        torch.zeros(0, dtype=torch.float64, device=comm)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    out, start = [], 0
    for t in tensors:
        out.append(flat[start:start + t.numel()].reshape(t.shape).to(t.device, t.dtype))
        start += t.numel()
    return out


def gather(obj: Any, what: str) -> list:
    """Every rank's ``obj`` (picklable), in rank order. Alone: ``[obj]``."""
    if _WORLD is None:
        return [obj]
    import torch.distributed as dist

    _exchange(None, what)
    out: list = [None] * _WORLD.size
    dist.all_gather_object(out, obj)
    return out


@contextlib.contextmanager
def guard(what: str) -> Iterator[None]:
    """Run a data-parallel pass: an error on this rank is announced to the others, then re-raised.

    The others get it at their next collective (:func:`gather`, :func:`sum_tensors`, :func:`agree`)
    as :class:`RankFailed`. Nested guards announce an error once. Alone: just the block.
    """
    if _WORLD is None:
        yield
        return
    try:
        yield
    except BaseException as exc:
        if not isinstance(exc, RankFailed) and not getattr(exc, "_headprune_announced", False) \
                and _WORLD is not None:
            try:
                exc._headprune_announced = True
            except AttributeError:
                pass
            with contextlib.suppress(Exception):     # a peer that is gone already: nothing to tell
                _exchange(f"{type(exc).__name__}: {exc}".splitlines()[0][:500], what)
        raise


# -- commands (the CLI) ----------------------------------------------------------------------------

def join_for_command(command: str, supported: bool, asked: bool, device: str | None,
                     device_map: bool) -> World | None:
    """Join the group for a ``headprune`` command when asked (``--distributed``) or under torchrun.

    supported: the command has data passes (takes ``--distributed``); device_map: ``--device-map``
    was given (one process per node then). None: run alone.
    """
    if not asked and not launched_by_torchrun():
        return None
    if not supported:
        raise UsageError(f"`headprune {command}` runs in one process (it takes no --distributed); run it "
                         "without torchrun (or with --nproc-per-node 1).")
    if device_map and int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1:
        raise UsageError("--device-map spreads one model over this node's GPUs, so run one process per node: "
                         "torchrun --nproc-per-node 1 (ranks on other nodes add data parallelism).")
    return init(device)


def run_everywhere(command, what: str) -> None:
    """``command()`` on every rank: rank 0 prints, the others stay quiet unless they fail.

    Ends with :func:`agree`, so every rank leaves knowing the others succeeded.
    """
    with guard(what):
        with open(os.devnull, "w") if not is_writer() else contextlib.nullcontext() as quiet:
            with contextlib.redirect_stdout(quiet) if quiet is not None else contextlib.nullcontext():
                command()
        agree(what)


def rank_prefix() -> str:
    """``"[rank R of P] "`` for messages printed by every rank; empty alone."""
    return f"[rank {_WORLD.rank} of {_WORLD.size}] " if _WORLD is not None else ""

