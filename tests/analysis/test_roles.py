"""Head roles on tiny random models: the JSON round trip, shapes and applicability on every family,
the shared model left as it was, a constructed exact previous-token head, the induction score on a known
pattern, protection in the presets and the removal summary."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from pruning_core.core.errors import Cancelled, FormatError, HeadpruneError, UsageError
from pruning_core.core.heads import HeadLayout, HeadMask, HeadScores
from pruning_core.modeling.masking import installed_hook_count
from pruning_core.modeling.presets import keep_top_per_layer, remove_least_important
from pruning_core.analysis.roles import (
    RoleReport,
    compute_roles,
    parse_roles,
    protected_heads,
    removal_summary,
    role_names,
)
from pruning_core.analysis.roles.base import ProbeSequence
from pruning_core.analysis.roles.patterns import duplicate_token, induction, previous_token
from pruning_core.analysis.roles.probes import repeated_sequences
from tiny import ALL_ARCHS, synthetic_task, tiny_inputs, tiny_loaded

FAST = dict(n_texts=4, repeat_batch=2, needles=1, haystack_tokens=24)


@pytest.fixture(scope="module")
def task():
    return synthetic_task()


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_every_family_gets_scores_of_its_shape_and_only_where_a_role_applies(arch, task, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    report = compute_roles(lm, task=task, **FAST)
    assert list(report.roles) == role_names()
    expect = {"previous_token": {"encoder_self", "decoder_self"}, "current_token": {"encoder_self", "decoder_self"},
              "first_token": {"encoder_self", "decoder_self", "cross"},
              "duplicate_token": {"encoder_self", "decoder_self"}, "induction": {"decoder_self"},
              "positional": {"encoder_self", "decoder_self"}, "rare_word": {"encoder_self", "decoder_self"},
              "retrieval": {"decoder_self"} if lm.task_type == "language_model" else set(),
              "alignment": {"cross"} if lm.task_type == "asr" else set()}
    kinds = set(lm.layout.kinds) - ({"encoder_self"} if lm.task_type == "asr" else set())
    for role, grids in report.scores.items():
        assert set(grids) == expect[role] & kinds, role          # absent where it does not apply, never zeros
        for kind, grid in grids.items():
            assert grid.shape == (len(lm.layout.kinds[kind]), max(lm.layout.kinds[kind]))
            assert np.isfinite(grid).all() and (grid >= 0).all() and (grid <= 1 + 1e-6).all(), (role, kind)


def test_json_round_trip_and_schema(task, tmp_path):
    lm = tiny_loaded("llama", tmp_path)
    report = compute_roles(lm, task=task, **FAST)
    data = json.loads(json.dumps(report.to_json()))
    assert data["format"] == "headprune.roles/1"
    assert set(data) >= {"roles", "thresholds", "probes", "provenance"}
    assert data["roles"]["induction"]["decoder_self"][1][3] == pytest.approx(report.scores["induction"]["decoder_self"][1, 3])
    assert data["roles"]["retrieval"].keys() == {"decoder_self"} and "cross" not in data["roles"]["first_token"]
    assert data["probes"]["induction"]["size"]["n"] == 31               # 50 capped to (64 positions - 2) // 2
    back = RoleReport.from_json(data)
    assert back.thresholds == report.thresholds and back.layout == report.layout
    for role in report.roles:
        for kind in report.scores[role]:
            np.testing.assert_array_equal(back.scores[role][kind], report.scores[role][kind])
    assert back.to_json() == data
    with pytest.raises(FormatError, match="headprune.roles/1"):
        RoleReport.from_json({**data, "format": "headprune.scores/1"})
    broken = json.loads(json.dumps(data))
    broken["roles"]["induction"]["decoder_self"][0].pop()
    with pytest.raises(FormatError, match="heads per layer"):
        RoleReport.from_json(broken)


@pytest.mark.parametrize("arch", ["bart", "qwen2"])
def test_the_shared_model_is_left_as_it_was_even_when_cancelled(arch, task, tmp_path):
    lm = tiny_loaded(arch, tmp_path)
    with torch.no_grad():          # transformers installs its own output-capturing hooks on the first forward
        lm.model(**tiny_inputs(arch), output_attentions=True)
    hooks = installed_hook_count(lm.model)
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    config = lm.model.config.to_dict()
    compute_roles(lm, task=task, **FAST)

    def cancel(event):
        if event.done >= 2:
            raise Cancelled("stop")
    with pytest.raises(Cancelled):
        compute_roles(lm, task=task, progress=cancel, **FAST)
    after = lm.model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert lm.model.config.to_dict() == config and lm.model.config._attn_implementation == "eager"
    assert not lm.model.training and installed_hook_count(lm.model) == hooks


def test_a_model_without_attention_maps_is_refused(task, tmp_path):
    lm = tiny_loaded("llama", tmp_path, attn_implementation="sdpa")
    with pytest.raises(HeadpruneError, match="eager"):
        compute_roles(lm, task=task, **FAST)


def test_unknown_role_lists_the_known_ones():
    with pytest.raises(UsageError, match="Did you mean .induction.*Available: .*previous_token"):
        parse_roles("induktion")
    assert parse_roles("induction, retrieval,induction") == ["induction", "retrieval"]


# -- a constructed exact previous-token head -----------------------------------------------------------------

def _previous_token_qwen2(tmp_path):
    """Tiny Qwen2 whose layer 0 head 0 attends to position i - 1 with probability ~1.

    Its query and key are constants (weights 0, biases set); rotary embeddings then make q_i . k_j depend on
    i - j only: each rotary pair f (frequency theta_f) holds k = (1, 0) and q = 100 * (cos -theta_f, sin -theta_f),
    so q_i . k_j = 100 * sum_f cos((i - j - 1) theta_f), largest at i - j = 1 for every pair.
    """
    lm = tiny_loaded("qwen2", tmp_path)
    attn = lm.model.model.layers[0].self_attn
    d = attn.head_dim                                                    # 8: pairs (f, f + 4)
    inv = 1.0 / (lm.model.config.rope_parameters["rope_theta"] ** (torch.arange(0, d, 2).float() / d))
    q = torch.cat([torch.cos(-inv), torch.sin(-inv)]) * 100.0
    k = torch.cat([torch.ones(d // 2), torch.zeros(d // 2)])
    with torch.no_grad():
        attn.q_proj.weight[:d] = 0
        attn.q_proj.bias[:d] = q
        attn.k_proj.weight[:d] = 0                                      # key/value head 0 (query heads 0 and 1)
        attn.k_proj.bias[:d] = k
    return lm


def test_a_constructed_previous_token_head_is_found_as_that_and_not_as_others(tmp_path):
    lm = _previous_token_qwen2(tmp_path)
    words = "the a good bad movie film great awful plot acting fun dull love hate it was is not very really".split()
    rng = np.random.default_rng(0)
    rows = [{"text": " ".join(rng.choice(words, 16, replace=False)), "label": 0} for _ in range(12)]
    report = compute_roles(lm, task=synthetic_task(rows), n_texts=12, repeat_batch=2, needles=1, haystack_tokens=24)
    head = ("decoder_self", 0, 0)
    assert report.score("previous_token", head) > 0.95
    for role in report.roles:
        found = head in report.heads(role)
        # a fixed offset of -1 is also Voita's positional head: positional subsumes previous-token
        assert found == (role in ("previous_token", "positional")), (role, report.score(role, head))
    assert report.strongest()["decoder_self"][0][0] == "previous_token"


# -- scores on known patterns --------------------------------------------------------------------------------

def _seq(maps, ids, causal=True, **marks):
    ids = np.asarray(ids)
    return ProbeSequence((np.asarray(maps, dtype=np.float32),), ids, ids, causal, np.zeros(len(ids), bool), marks)


def test_induction_score_of_a_known_pattern():
    n, start = 5, 6                                                     # [BOS] + R + R: positions 0, 1..5, 6..10
    T = 1 + 2 * n
    ids = [0] + [11, 12, 13, 14, 15] * 2
    a = np.zeros((3, T, T))
    a[:, np.arange(T), 0] = 1.0                                         # heads 1, 2: sink everywhere ...
    a[0] = 0
    for i in range(T):
        j = i - (n - 1) if i >= start else 0                            # head 0: token after the first occurrence
        a[0, i, j] = 1.0
    a[1, start:] = 0
    a[1, np.arange(start, T), np.arange(start, T) - 1] = 1.0            # head 1: previous token in the second copy
    seq = _seq(a, ids, repeat=n, start=start)
    assert induction(seq, a).tolist() == [1.0, 0.0, 0.0]
    assert previous_token(seq, a)[1] == pytest.approx((n + 1) / (T - 1))   # + row 1, whose sink is its previous token
    dup = duplicate_token(seq, a)                                       # head 0 looks one past the duplicate
    assert dup[0] == pytest.approx(0.0) and dup[2] == pytest.approx(0.0)


def test_bidirectional_previous_token_takes_the_next_token_too():
    T = 6
    a = np.zeros((2, T, T))
    a[0, np.arange(T - 1), np.arange(1, T)] = 1.0                       # head 0: next token
    a[0, T - 1, T - 2] = 1.0
    a[1, np.arange(T), np.arange(T)] = 1.0                              # head 1: itself
    seq = _seq(a, range(T), causal=False)
    assert previous_token(seq, a)[0] == pytest.approx(1.0) and previous_token(seq, a)[1] == 0.0
    assert previous_token(_seq(a, range(T)), a)[0] == pytest.approx(1 / (T - 1))   # causal reading: -1 only


def test_repeated_probe_is_bos_then_the_same_random_tokens_twice(tmp_path):
    lm = tiny_loaded("gpt2", tmp_path)
    seqs = list(repeated_sequences(lm, n=7, batch=3, seed=4, chunk=2))
    assert len(seqs) == 3
    again = [s["decoder_self"].query_ids for s in repeated_sequences(lm, n=7, batch=3, seed=4)]
    for s, same in zip(seqs, again):
        ids = s["decoder_self"].query_ids
        assert ids[0] == 5 and len(ids) == 15 and (ids[1:8] == ids[8:]).all() and (ids == same).all()
        assert not set(ids[1:].tolist()) & set(lm.tokenizer.all_special_ids)        # no special token
        assert s["decoder_self"].maps[0].shape == (4, 15, 15)


# -- protection and the summary ------------------------------------------------------------------------------

def _report() -> RoleReport:
    layout = HeadLayout({"decoder_self": (3, 3)})
    ind = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.0]])
    ret = np.array([[0.0, 0.0, 0.3], [0.0, 0.0, 0.0]])
    return RoleReport(layout, {"induction": {"decoder_self": ind}, "retrieval": {"decoder_self": ret},
                               "rare_word": {"decoder_self": np.zeros((2, 3))}},
                      {"induction": 0.4, "retrieval": 0.1, "rare_word": 0.5})


def test_removal_summary_counts_role_heads_a_mask_removes():
    report = _report()
    assert report.heads("induction") == [("decoder_self", 0, 0), ("decoder_self", 0, 2), ("decoder_self", 1, 1)]
    mask = HeadMask.from_removed(report.layout, [("decoder_self", 0, 0), ("decoder_self", 1, 1), ("decoder_self", 1, 2)])
    assert removal_summary(report, mask) == "removes 2 of 3 induction heads, 0 of 1 retrieval head"
    assert removal_summary(report, HeadMask.full(report.layout), ["retrieval"]) == "removes 0 of 1 retrieval head"
    assert removal_summary(report, mask, ["rare_word"]) == "removes 0 of 0 rare word heads"
    assert report.strongest()["decoder_self"] == [["induction", None, "retrieval"], [None, "induction", None]]


def test_presets_never_remove_protected_heads():
    report = _report()
    protected = protected_heads(report, ["induction", "retrieval"])
    assert protected == {("decoder_self", 0, 0), ("decoder_self", 0, 2), ("decoder_self", 1, 1)}
    scores = HeadScores({"decoder_self": ((0.1, 0.5, 0.2), (0.3, 0.05, 0.9))})     # protected heads least important
    plain = remove_least_important(scores, 0.5)
    assert set(plain.removed()) & protected
    mask = remove_least_important(scores, 0.5, protected=protected)
    assert not set(mask.removed()) & protected and len(mask.removed()) == 3          # the other three go
    per_layer = remove_least_important(scores, 0.5, per_layer=True, protected=protected)
    # round(0.5 * 3) = 2 per layer, taken from the unprotected heads: layer 0 has only one
    assert per_layer.removed() == [("decoder_self", 0, 1), ("decoder_self", 1, 0), ("decoder_self", 1, 2)]
    top = keep_top_per_layer(scores, 1, protected=protected)
    assert top.kinds["decoder_self"] == ((1, 1, 1), (0, 1, 1))                      # the best head + protected
    with pytest.raises(UsageError, match="Available"):
        protected_heads(report, ["inductio"])
    assert math.isclose(report.score("induction", ("decoder_self", 1, 1)), 0.8)


def test_a_tokenizer_that_drops_the_needles_number_is_a_clear_error(tmp_path):
    """A tokenizer that maps ' 48213' to nothing used to crash deep in decoding (TypeError); now the probe
    says what is wrong and how to go on without retrieval."""
    from types import SimpleNamespace

    from pruning_core.analysis.roles.needle import needle_prompts
    lm = tiny_loaded("llama", tmp_path)
    real = lm.tokenizer

    def no_digits(text, **kwargs):
        out = real(text, **kwargs)
        return {"input_ids": [] if text.strip().isdigit() else out["input_ids"]}
    loaded = SimpleNamespace(tokenizer=no_digits, model=lm.model)
    with pytest.raises(HeadpruneError, match="needle's number .* into no tokens.*--roles"):
        needle_prompts(loaded, ["a plain sentence about a film", "another one"])
