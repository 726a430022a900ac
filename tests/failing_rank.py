"""``torchrun ... tests/failing_rank.py ARGS``: the ``headprune`` command, with rank 1 failing at its first
batch (how the tests reach the failure path of a data-parallel pass without a hook in the library)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))          # this checkout's library

from pruning_core.cli.main import main  # noqa: E402
from pruning_core.core.runtime import distributed  # noqa: E402
from pruning_core.core.errors import HeadpruneError  # noqa: E402

FAILING_RANK = 1
_batches = distributed.batches


def _failing_batches(data, batch_size: int, device=None):
    batches, total = _batches(data, batch_size, device)
    world = distributed.current()
    if world is None or world.rank != FAILING_RANK:
        return batches, total

    def fail():
        raise HeadpruneError(f"rank {world.rank} failed on purpose (tests/failing_rank.py).")
        yield                                                        # a generator: it fails at its first batch
    return fail(), total


distributed.batches = _failing_batches
sys.exit(main(sys.argv[1:]))
