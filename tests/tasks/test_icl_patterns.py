"""The in-context pattern tasks (``icl-*``): deterministic from the seed, splits disjoint by word, prompts that
follow the rule, exact match of the answer's first line, decoding that stops at the line's end (tiny random
decoder, byte-level tokenizer)."""
from __future__ import annotations

from contextlib import contextmanager

import pytest

from pruning_core.core.errors import DataError
from pruning_core.tasks import clear_cache, get_task, task_names
from pruning_core.tasks.base import EvalState
from pruning_core.tasks.data import ruler, wordlists
from pruning_core.tasks.long_context import LongContextTask, is_exact, is_right
from tests.long_context_tiny import WORDS, long_loaded

KINDS = list(ruler.ICL_KINDS)
RULES = {"icl-repetition": (0, 1), "icl-recursion": (1, 1), "icl-centre-embedding": (1, 0)}


@pytest.fixture(scope="module")
def lm():
    return long_loaded("llama")


def _words(spec: dict) -> set[str]:
    return {w for pair in spec["shots"] + [spec["query"]] for w in pair}


def test_the_kinds_are_the_three_patterns():
    assert set(KINDS) == set(RULES)
    assert not set(KINDS) & set(ruler.RULER_KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_generation_is_deterministic_from_the_seed(kind):
    a, b = ruler.specs(kind, "test", WORDS, 20), ruler.specs(kind, "test", WORDS, 20)
    assert a == b
    assert [s["query"] for s in ruler.specs(kind, "test", WORDS, 20, seed=1)] != [s["query"] for s in a]
    assert len({tuple(s["query"]) for s in a}) == 20


@pytest.mark.parametrize("kind", KINDS)
def test_train_and_test_share_no_word(kind):
    train, test = ruler.specs(kind, "train", WORDS, 100), ruler.specs(kind, "test", WORDS, 100)
    train_words, test_words = set().union(*map(_words, train)), set().union(*map(_words, test))
    assert not train_words & test_words
    assert all(ruler.split_of(ruler.ICL, w) == "train" for w in train_words)
    assert all(ruler.split_of(ruler.ICL, w) == "test" for w in test_words)


def test_the_pool_keeps_short_single_words_of_its_split():
    words = wordlists.Words(nouns=("ox", "cat", "dog", "sun", "moon", "tree", "rock", "elephant", "ice-cream"),
                        adjectives=(), verbs=())
    pools = {split: ruler.icl_pool(words, split) for split in ruler.SPLITS}
    assert sorted(pools["train"] + pools["test"]) == ["cat", "dog", "moon", "rock", "sun", "tree"]
    assert not set(pools["train"]) & set(pools["test"])


def test_too_few_words_are_refused():
    words = wordlists.Words(nouns=("cat",), adjectives=(), verbs=())
    with pytest.raises(DataError, match=f"needs {ruler.ICL_WORDS}"):
        ruler.specs("icl-recursion", ruler.split_of(ruler.ICL, "cat"), words, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_every_line_follows_the_rule_and_the_answer_completes_the_query(kind):
    rule = RULES[kind]
    for spec in ruler.specs(kind, "test", WORDS, 5):
        a, b = spec["query"]
        assert len(_words(spec)) == ruler.ICL_WORDS                          # no noun twice in an example
        assert spec["answer"] == " ".join((a, b)[i] for i in rule) and spec["answers"] == [spec["answer"]]
        prompt, prefix = ruler.render(spec, WORDS, ruler.ICL_SHOTS, 1024)
        lines = prompt.split("\n")
        assert prefix == "->" and lines[-1] == f"{a} {b}" and len(lines) == ruler.ICL_SHOTS + 1
        for line, (x, y) in zip(lines, spec["shots"]):
            left, right = line.split(" -> ")
            assert left == f"{x} {y}" and right == " ".join((x, y)[i] for i in rule)


def test_the_rules_differ_on_the_same_pair():
    line = {kind: ruler.icl_line(("cat", "dog"), RULES[kind]) for kind in KINDS}
    assert line == {"icl-repetition": "cat dog -> cat dog", "icl-recursion": "cat dog -> dog dog",
                    "icl-centre-embedding": "cat dog -> dog cat"}


def test_encoding_takes_every_demonstration_and_the_context_caps_them(lm):
    task = LongContextTask("icl-recursion", words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 3)
    for text, feature, spec in zip(data.texts, data.features, ruler.specs("icl-recursion", "test", WORDS, 3)):
        assert text["filler"] == ruler.ICL_SHOTS and text["answers"] == [spec["answer"]]
        decoded = lm.tokenizer.decode(feature["input_ids"])
        assert decoded.endswith(f"\n{spec['query'][0]} {spec['query'][1]} ->")
    first = lm.tokenizer(" " + data.texts[0]["answers"][0], add_special_tokens=False)["input_ids"][0]
    assert data.specials["first_answer_token"][0] == first
    clear_cache()
    short = task.encode(lm, "test", 3, max_length=200)
    budget = 200 - ruler.KINDS["icl-recursion"].new_tokens
    assert all(1 <= t["filler"] < ruler.ICL_SHOTS and t["tokens"] <= budget for t in short.texts)


def test_the_first_line_must_be_the_answer_word_for_word():
    assert is_exact(" moon sun\nsun moon -> moon sun", "moon sun")
    assert is_exact("  Moon  sun ", "moon sun")
    assert not is_exact(" sun moon", "moon sun")            # RULER's string match would take this
    assert not is_exact(" moon sun tree", "moon sun")
    assert not is_exact(" moon", "moon sun")
    assert not is_exact("\nmoon sun", "moon sun")
    icl, niah = ruler.KINDS["icl-centre-embedding"], ruler.KINDS["niah-single"]
    assert not is_right(icl, " sun moon", ["moon sun"]) and is_right(icl, " moon sun\n", ["moon sun"])
    assert is_right(niah, " is 1234567.", ["1234567"])


def test_predict_batch_scores_by_the_first_line(lm):
    task = LongContextTask("icl-repetition", words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 3)
    batch = next(data.batches(3, sort_by_length=False))
    answers = [t["answers"][0] for t in data.texts]
    outputs = [f" {answers[0]}\n", " " + " ".join(reversed(answers[1].split())), f" {answers[2]} {answers[2]}"]
    state = EvalState(predictions=[None] * 3)
    task.predict_batch(lm, data, batch, [outputs[j] for j in batch.index.tolist()], state)
    assert state.predictions == [1, 0, 0]


@contextmanager
def forced(lm, text: str):
    """The model's greedy tokens forced to spell ``text``, one byte per call of the output layer."""
    ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    calls = []

    def hook(module, args, out):
        out = out.clone()
        out[..., ids[min(len(calls), len(ids) - 1)]] += 1e4
        calls.append(1)
        return out

    handle = lm.model.lm_head.register_forward_hook(hook)
    try:
        yield calls
    finally:
        handle.remove()


def test_evaluate_stops_at_the_line_end_and_scores_exact_match():
    lm = long_loaded("llama")
    task = LongContextTask("icl-centre-embedding", words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 1)
    answer = data.texts[0]["answers"][0]
    with forced(lm, f" {answer}\nmore words"):
        right = task.evaluate(lm, data)
    assert right.extra["decoded"] == [f" {answer}\n"] and right.metric == 1.0
    assert right.interval[0] < 1.0 <= right.interval[1] + 1e-12            # the Wilson interval of 1/1
    with forced(lm, " " + " ".join(reversed(answer.split())) + "\n"):
        wrong = task.evaluate(lm, data)
    assert wrong.metric == 0.0
    niah = LongContextTask("niah-single", words=WORDS)                       # RULER kinds decode on past a line
    clear_cache()
    needle = niah.encode(lm, "test", 1, max_length=600)
    with forced(lm, "\n"):
        res = niah.evaluate(lm, needle)
    assert res.extra["decoded"] == ["\n" * ruler.KINDS["niah-single"].new_tokens]
    assert not lm.model.lm_head._forward_hooks


def test_registered_in_their_own_family():
    names = task_names()
    assert all(k in names for k in KINDS)
    assert names.index("icl-repetition") > names.index("niah-single")
    task = get_task("icl-recursion")
    assert isinstance(task, LongContextTask) and task.splits == ("train", "test")
    with pytest.raises(DataError, match="Did you mean 'icl-recursion'"):
        get_task("icl-recursoin")
