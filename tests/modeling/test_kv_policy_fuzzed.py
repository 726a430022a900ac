"""Any KV-policy file, however broken, is read or refused with a :class:`HeadpruneError` that names the file
and says what to do: never ``OverflowError`` for ``1e999``; sink and window fit a 32-bit position."""
from __future__ import annotations

import json

import pytest
from hypothesis import given

from bad_inputs import FUZZ, assert_clear, documents, write
from pruning_core.modeling.kv.kv_policy import MAX_TOKENS, KVPolicy, load_policy

POLICY = KVPolicy(((True, False), (False, False), (True, True)), 4, 8, {"method": "random", "seed": 0}).to_json({})


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("policies")


@FUZZ
@given(documents(POLICY))
def test_any_kv_policy_file_is_read_or_refused_clearly(folder, text):
    path = write(folder / "policy.json", text)
    assert_clear(lambda: load_policy(path), path)


@pytest.mark.parametrize("key, value", [("sink", 1e308), ("sink", float("inf")), ("window", 2 ** 63),
                                        ("window", 0.5), ("sink", True), ("sink", -1)])
def test_sink_and_window_are_whole_numbers_within_range(folder, key, value):
    path = write(folder / "policy.json", json.dumps({**POLICY, key: value}))
    message = assert_clear(lambda: load_policy(path), path)
    assert message is not None and key in message


def test_the_largest_sink_and_window_are_read():
    policy = KVPolicy.from_json({**POLICY, "sink": MAX_TOKENS, "window": MAX_TOKENS})
    assert (policy.sink, policy.window) == (MAX_TOKENS, MAX_TOKENS)
