"""The batch plan: every example once, shortest first, and a task's padding bound kept."""
from types import SimpleNamespace

import pytest

from pruning_core.core.errors import DataError
from pruning_core.tasks.batching import EncodedData
from pruning_core.tasks.language_model import LanguageModelTask

LENGTHS = [58, 8, 21, 37, 9, 22, 15, 49, 20, 26, 21, 38, 18, 23, 22, 37]


def _data(max_padding):
    task = SimpleNamespace(max_padding=max_padding)
    return EncodedData(task=task, split="validation", n_examples=len(LENGTHS), fingerprint="f", texts=[],
                       references=None, features=[{"input_ids": [1] * n} for n in LENGTHS], lengths=LENGTHS)


@pytest.mark.parametrize("batch_size", [1, 3, 8, 64])
@pytest.mark.parametrize("max_padding", [None, 0.0, 0.25, 0.5])
def test_every_example_once_shortest_first_within_the_bound(batch_size, max_padding):
    plan = _data(max_padding).plan(batch_size)
    flat = [i for rows in plan for i in rows]
    assert sorted(flat) == list(range(len(LENGTHS)))
    assert [LENGTHS[i] for i in flat] == sorted(LENGTHS)
    assert all(1 <= len(rows) <= batch_size for rows in plan)
    for rows in plan:
        lens = [LENGTHS[i] for i in rows]
        if max_padding is not None and len(rows) > 1:
            assert sum(lens) >= (1 - max_padding) * max(lens) * len(lens)
    if max_padding is None:
        assert len(plan) == -(-len(LENGTHS) // batch_size)


def test_a_bound_cuts_padding_and_batches_are_counted_alike():
    free, bounded = _data(None), _data(0.25)
    assert bounded.padding_fraction(64) <= 0.25 < free.padding_fraction(64)
    assert bounded.n_batches(64) == len(bounded.plan(64)) > free.n_batches(64) == 1
    assert bounded.n_batches(64, part=(1, 2)) == len(bounded.plan(64)[1::2])


def test_language_models_bound_padding_and_a_bad_size_is_refused():
    assert LanguageModelTask.max_padding == 0.25
    with pytest.raises(DataError, match="at least 1"):
        _data(None).plan(0)
