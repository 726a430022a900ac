"""The far in-context tasks (``icl-*-far``): the short kinds' examples, their demonstrations one block at a seeded
depth of noise filler that grows to the context, the query last, judged as the short kinds (tiny random decoder,
byte-level tokenizer)."""
from __future__ import annotations

import pytest

from pruning_core.tasks import clear_cache, get_task
from pruning_core.tasks.registry import TASKS
from pruning_core.tasks.data import ruler
from pruning_core.tasks.long_context import LongContextTask, is_right
from tests.long_context_tiny import WORDS, long_loaded

FAR = {"icl-repetition-far": "icl-repetition", "icl-recursion-far": "icl-recursion"}


@pytest.fixture(scope="module")
def lm():
    return long_loaded("llama")


def test_the_far_kinds_are_registered_as_long_context_tasks():
    assert set(ruler.ICL_FAR_KINDS) == set(FAR)
    assert not set(FAR) & (set(ruler.ICL_KINDS) | set(ruler.RULER_KINDS))
    assert all(TASKS.entry(k).meta["family"] == "long-context" for k in FAR)
    assert all(ruler.KINDS[k].in_context for k in FAR) and not ruler.KINDS["niah-single"].in_context


@pytest.mark.parametrize("far,short", FAR.items())
def test_a_far_example_is_the_short_kinds_example_with_a_depth(far, short):
    for split in ruler.SPLITS:
        for a, b in zip(ruler.specs(far, split, WORDS, 20), ruler.specs(short, split, WORDS, 20)):
            assert {k: v for k, v in a.items() if k not in ("id", "kind", "depth")} == \
                   {k: v for k, v in b.items() if k not in ("id", "kind")}
            assert ruler.ICL_FAR_DEPTH[0] <= a["depth"] <= ruler.ICL_FAR_DEPTH[1]
    assert len({s["depth"] for s in ruler.specs(far, "test", WORDS, 20)}) == 20


@pytest.mark.parametrize("far", FAR)
def test_the_demonstrations_sit_at_the_depth_and_the_query_is_last(far):
    k = 40
    for spec in ruler.specs(far, "test", WORDS, 5):
        prompt, prefix = ruler.render(spec, WORDS, k, 4096)
        lines = prompt.split("\n")
        block = lines.index(ruler.icl_line(spec["shots"][0], spec["rule"]))
        assert lines[block:block + ruler.ICL_SHOTS] == [ruler.icl_line(p, spec["rule"]) for p in spec["shots"]]
        before, after = lines[block - 1], lines[block + ruler.ICL_SHOTS]
        assert before.count(ruler.NOISE) == round(spec["depth"] * k)
        assert after.count(ruler.NOISE) == k - round(spec["depth"] * k)
        assert lines[-1] == " ".join(spec["query"]) and prefix == "->"
        assert " -> " not in "".join(lines[:block] + lines[block + ruler.ICL_SHOTS:])


def test_encoding_fills_the_context_with_noise_past_the_sink_and_window(lm):
    task = LongContextTask("icl-recursion-far", words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 3, max_length=2048)
    budget = 2048 - ruler.KINDS["icl-recursion-far"].new_tokens
    for text, feature, spec in zip(data.texts, data.features, ruler.specs("icl-recursion-far", "test", WORDS, 3)):
        assert budget - len(ruler.NOISE) - 2 < text["tokens"] <= budget          # bytes: one noise unit short at most
        decoded = lm.tokenizer.decode(feature["input_ids"])
        first = decoded.index(ruler.icl_line(spec["shots"][0], spec["rule"]))
        last = decoded.index(ruler.icl_line(spec["shots"][-1], spec["rule"]))
        assert 128 < first and last < len(decoded) - 256        # outside a 128-token sink and a 256-token window
        assert decoded.endswith(f"\n{spec['query'][0]} {spec['query'][1]} ->")


def test_a_far_kind_is_judged_by_the_first_line():
    far = ruler.KINDS["icl-recursion-far"]
    assert is_right(far, " dog dog\ncat", ["dog dog"])
    assert not is_right(far, " cat dog", ["dog dog"]) and not is_right(far, " dog dog dog", ["dog dog"])


def test_the_registry_builds_them():
    assert isinstance(get_task("icl-repetition-far"), LongContextTask)
