"""RULER-style long-context tasks: deterministic from the seed, lengths at the target, disjoint splits, exact
match with intervals, and evaluation under a KV policy (tiny random decoders, byte-level tokenizer)."""
from __future__ import annotations

import io
import re
import zipfile

import pytest
import torch

from pruning_core.core.errors import DataError
from pruning_core.modeling.kv import kv_policy as kvp
from pruning_core.tasks import clear_cache, get_task
from pruning_core.tasks.data import ruler, wordlists
from pruning_core.tasks.long_context import LongContextTask, is_correct, partial_score, ruler_score
from tests.long_context_tiny import WORDS, long_loaded

KINDS = list(ruler.RULER_KINDS)              # the in-context kinds: tests/tasks/test_icl_patterns.py


@pytest.fixture(scope="module")
def lm():
    return long_loaded("llama")


def _encode(lm, kind, split="test", limit=4, context=1024, seed=0):
    clear_cache()
    return LongContextTask(kind, seed=seed, words=WORDS).encode(lm, split, limit, max_length=context)


@pytest.mark.parametrize("kind", KINDS)
def test_generation_is_deterministic_from_the_seed(lm, kind):
    a, b = _encode(lm, kind), _encode(lm, kind)
    assert [f["input_ids"] for f in a.features] == [f["input_ids"] for f in b.features]
    assert a.fingerprint == b.fingerprint
    c = _encode(lm, kind, seed=1)
    assert [t["answers"] for t in c.texts] != [t["answers"] for t in a.texts]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("context", [1024, 2048, 4096])
def test_prompts_fill_the_context_in_model_tokens(lm, kind, context):
    data = _encode(lm, kind, limit=3, context=context)
    budget = context - ruler.KINDS[kind].new_tokens
    for text, feature in zip(data.texts, data.features):
        n = len(feature["input_ids"])
        assert n == text["tokens"] <= budget
        assert n >= 0.9 * budget                 # one filler unit more would not fit: at most a unit short


@pytest.mark.parametrize("kind", KINDS)
def test_train_and_test_are_disjoint(kind):
    train = ruler.specs(kind, "train", WORDS, 60)
    test = ruler.specs(kind, "test", WORDS, 60)
    assert not {s["answer"] for s in train} & {s["answer"] for s in test}
    assert all(ruler.split_of(kind, s["answer"]) == "train" for s in train)
    assert len({s["answer"] for s in test}) == 60


def test_answers_appear_in_the_prompt_and_match(lm):
    for kind in KINDS:
        spec = ruler.specs(kind, "test", WORDS, 1)[0]
        prompt, prefix = ruler.render(spec, WORDS, 20, 1024)
        assert all(a in prompt for a in spec["answers"])
        assert is_correct(" " + ", ".join(spec["answers"]) + ".", spec["answers"])
        assert not is_correct(" " + ", ".join(spec["answers"][:-1]), spec["answers"])


def test_prompts_take_rulers_base_model_form_even_with_a_chat_template():
    """RULER's niah template in its single-value form, the answer prefix after the question on the same line, and
    no chat template around it although the tokenizer has one (RULER's ``base`` model template)."""
    lm = long_loaded("llama")
    lm.tokenizer.chat_template = "{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}<|assistant|>"
    data = _encode(lm, "niah-single", limit=2, context=600)
    for spec, feature in zip(ruler.specs("niah-single", "test", WORDS, 2), data.features):
        text = lm.tokenizer.decode(feature["input_ids"])
        key = spec["key"]
        assert text.startswith("A special magic number is hidden within the following text.")
        assert text.endswith(f"What is the special magic number for {key} mentioned in the provided text? "
                             f"The special magic number for {key} mentioned in the provided text is")
        assert f"One of the special magic numbers for {key} is: {spec['value']}." in text
        assert "<|user|>" not in text and "<|assistant|>" not in text
    uuid = ruler.specs("niah-multikey-uuid", "test", WORDS, 1)[0]
    prompt, prefix = ruler.render(uuid, WORDS, 3, 1024)
    assert prefix == f"The special magic uuid for {uuid['key']} mentioned in the provided text is"
    assert f"One of the special magic uuids for {uuid['key']} is: {uuid['value']}." in prompt


def test_frequent_words_answer_is_the_three_most_frequent():
    from collections import Counter
    for spec in ruler.specs("frequent-words", "test", WORDS, 5):
        prompt, _ = ruler.render(spec, WORDS, 300, 1024)
        context = prompt.split("coded words. ", 1)[1].split("\nQuestion", 1)[0].split()
        counts = Counter(w for w in context if w != "....")
        top = [w for w, _ in counts.most_common(4)]
        assert set(top[:3]) == set(spec["answers"]) and counts[top[2]] > counts[top[3]]


def test_common_words_answer_is_the_ten_most_common():
    from collections import Counter
    spec = ruler.specs("common-words", "test", WORDS, 1)[0]
    prompt, _ = ruler.render(spec, WORDS, 5, 1024)
    counts = Counter(e.split(". ", 1)[1] for e in re.findall(r"\d+\. [a-z]+", prompt.split("\n")[1]))
    assert {w for w, _ in counts.most_common(10)} == set(spec["answers"])


def test_evaluate_gives_exact_match_with_a_wilson_interval(lm):
    task = LongContextTask("niah-single", words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 3, max_length=640)
    res = task.evaluate(lm, data, batch_size=2)
    assert res.metric_name == "accuracy" and res.n_examples == 3
    assert res.per_example and set(res.per_example) <= {0, 1}
    assert res.metric == sum(res.per_example) / 3
    low, high = res.interval
    assert low - 1e-12 <= res.metric <= high                    # the Wilson bound of 0/3 is 0 up to rounding
    # the right answer decoded scores 1 (the random model above finds none)
    from pruning_core.tasks.base import EvalState
    state = EvalState(predictions=[None] * 3)
    batch = next(data.batches(3, sort_by_length=False))
    task.predict_batch(lm, data, batch, [" " + data.texts[j]["answers"][0] + "." if j != 1 else " 1234"
                                         for j in batch.index.tolist()], state)
    assert state.predictions == [1, 0, 1]
    assert len(res.example_losses) == 3 and all(x > 0 for x in res.example_losses)
    assert res.extra["context"] == 640 and len(res.extra["decoded"]) == 3
    assert res.extra["ruler_scores"] == [float(x) for x in res.per_example]       # one answer: all or nothing


def test_rulers_score_gives_the_share_of_answers_found():
    """RULER's ``string_match_all``: per example the share of its answers in the output (common words: 10), beside
    our all-or-nothing accuracy; an in-context kind stays exact."""
    answers = ["apple", "Pear", "fig", "plum"]
    assert ruler_score(" apple, pear and a FIG", answers) == 0.75 and not is_correct(" apple, pear and a FIG", answers)
    assert ruler_score(" apple pear fig plum", answers) == 1.0 and is_correct(" apple pear fig plum", answers)
    assert ruler_score(" nothing", answers) == 0.0
    icl = ruler.KINDS["icl-recursion"]
    assert partial_score(icl, " dog dog\n", ["dog dog"]) == 1.0 and partial_score(icl, " dog dog dog", ["dog dog"]) == 0
    assert partial_score(ruler.KINDS["common-words"], " apple, fig", answers) == 0.5


def test_summarise_keeps_each_examples_ruler_score(lm):
    task = LongContextTask("frequent-words", words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 2, max_length=600)
    from pruning_core.tasks.base import EvalState
    state = EvalState(predictions=[None] * 2)
    batch = next(data.batches(2, sort_by_length=False))
    answers = {j: data.texts[j]["answers"] for j in batch.index.tolist()}
    assert all(len(a) == 3 for a in answers.values())
    task.predict_batch(lm, data, batch, [" " + " ".join(answers[j][:1 + j]) for j in batch.index.tolist()], state)
    res = task.summarise(data, state)
    assert res.extra["ruler_scores"] == [1 / 3, 2 / 3] and res.extra["ruler_score"] == 0.5
    assert res.metric == 0                                              # all or nothing: neither has all three


def test_an_all_full_policy_evaluates_like_no_policy(lm):
    task = LongContextTask("niah-multikey", words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 2, max_length=600)
    plain = task.evaluate(lm, data)
    with kvp.applied(lm, kvp.KVPolicy.full(kvp.kv_heads_of(lm))):
        full = task.evaluate(lm, data)
    assert plain.example_losses == full.example_losses and plain.extra["decoded"] == full.extra["decoded"]
    with kvp.applied(lm, kvp.KVPolicy(((True, True), (True, True)), sink=4, window=16)):
        streamed = task.evaluate(lm, data)
    assert streamed.extra["kv_policy"]["streaming_kv_heads"] == 4
    assert streamed.example_losses != plain.example_losses      # a 16-token window changes a 600-token prompt


@pytest.mark.parametrize("kind", ["variable-tracking", "icl-repetition"])
def test_scorer_loss_reads_the_last_prompt_position(lm, kind):
    """example_losses on a padded batch's plain forward equals the per-example prefill loss of evaluate."""
    task = LongContextTask(kind, words=WORDS)
    clear_cache()
    data = task.encode(lm, "test", 2, max_length=600)
    res = task.evaluate(lm, data)
    batch = next(data.batches(2))
    with torch.no_grad():
        losses = task.example_losses(lm, batch, lm.model(**batch.inputs))
    by_index = dict(zip(batch.index.tolist(), losses.tolist()))
    for i, loss in enumerate(res.example_losses):
        assert by_index[i] == pytest.approx(loss, rel=1e-4, abs=1e-5)


def test_registered_and_checked():
    task = get_task("niah-single")
    assert isinstance(task, LongContextTask) and task.splits == ("train", "test")
    with pytest.raises(DataError, match="Did you mean 'niah-single'"):
        get_task("niah-singel")


def test_context_beyond_the_model_positions_is_refused():
    small = long_loaded("llama", positions=256)
    with pytest.raises(DataError, match="has 256 positions"):
        LongContextTask("niah-single", words=WORDS).encode(small, "test", 1, max_length=512)


def test_word_lists_come_from_the_pinned_wheel(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, member in wordlists.WORD_FILES.items():
            zf.writestr(member, "b\na\nb\n")
    assert wordlists.words_from_wheel(buf.getvalue()) == {n: ["a", "b"] for n in wordlists.WORD_FILES}
    fake = tmp_path / wordlists.WHEEL_FILENAME
    fake.write_bytes(buf.getvalue())
    with pytest.raises(DataError, match="expected 4dd66deb"):
        wordlists.prepare(wheel=fake, folder=tmp_path / "cache")
    assert not (tmp_path / "cache" / wordlists.MANIFEST).exists()
