"""The long-context commands on a tiny grouped-query decoder: evaluate --context --kv-policy, kv-policy,
causal-test; JSON with provenance and clear errors."""
import json

import pytest

from pruning_core.cli.main import main
from pruning_core.tasks import clear_cache
from pruning_core.tasks.data import wordlists


def run(*args):
    return main([str(a) for a in args])


@pytest.fixture
def lmdir(workdir):
    """``lm/``: a tiny Llama (4 query heads on 2 key/value heads per layer, 4096 positions, byte tokenizer), and
    made-up word lists in the empty HEADPRUNE_HOME (the real ones are a download)."""
    from long_context_tiny import WORDS, save_long_model
    save_long_model(workdir / "lm")
    wordlists.write_words({"nouns": list(WORDS.nouns), "adjectives": list(WORDS.adjectives),
                           "verbs": list(WORDS.verbs)}, wordlists.data_dir())
    clear_cache()
    return workdir


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit):
        run("--help")
    out = capsys.readouterr().out
    assert "kv-policy" in out and "causal-test" in out


def test_policy_evaluate_and_causal_test(lmdir, capsys):
    assert run("evaluate", "lm", "--task", "niah-single", "--context", 640, "--limit", 2, "--out", "e.json") == 0
    plain = json.loads((lmdir / "e.json").read_text())
    assert plain["format"] == "headprune.eval/1" and plain["metric_name"] == "accuracy"
    assert plain["provenance"]["settings"]["context"] == 640 and plain["n_examples"] == 2
    assert plain["provenance"]["split"] == "test" and plain["interval"] is not None

    assert run("kv-policy", "--random", 0, "--model", "lm", "--stream", 0.5, "--sink", 4, "--window", 16,
               "--context", 640, "--out", "p.json") == 0
    policy = json.loads((lmdir / "p.json").read_text())
    assert policy["format"] == "headprune.kv_policy/1" and policy["n_streaming"] == 2 and policy["n_heads"] == 4
    memory = policy["provenance"]["settings"]["memory"]
    # 2 layers x 2 kv heads, head_dim 8, float32: 2 streaming heads keep 20 tokens, 2 full heads 640
    assert memory["kv_bytes"] == 2 * 8 * 4 * (2 * 20 + 2 * 640) and memory["full_kv_bytes"] == 2 * 8 * 4 * 4 * 640
    assert "x smaller" in capsys.readouterr().out

    assert run("evaluate", "lm", "--task", "niah-single", "--context", 640, "--limit", 2, "--kv-policy", "p.json",
               "--out", "ep.json") == 0
    ruled = json.loads((lmdir / "ep.json").read_text())
    assert ruled["provenance"]["settings"]["kv_policy"]["memory"]["ratio"] == pytest.approx(
        memory["full_kv_bytes"] / memory["kv_bytes"])
    assert ruled["extra"]["kv_policy"]["streaming_kv_heads"] == 2

    assert run("score", "lm", "--task", "niah-single", "--method", "gradient", "--context", 512, "--limit", 2,
               "--out", "s.json") == 0
    assert json.loads((lmdir / "s.json").read_text())["provenance"]["split"] == "train"
    assert run("kv-policy", "s.json", "--stream", 0.25, "--out", "ps.json") == 0
    assert json.loads((lmdir / "ps.json").read_text())["source"]["score_split"] == "train"

    assert run("causal-test", "lm", "--task", "niah-single", "--scores", "s.json", "--top", 0.25, "--seeds", 2,
               "--limit", 2, "--context", 512, "--out", "c.json") == 0
    causal = json.loads((lmdir / "c.json").read_text())
    assert causal["format"] == "headprune.causal/1" and set(causal["runs"]) == {"dense", "top", "random-0", "random-1"}
    assert causal["n_heads_removed"] == 2 and all(len(r["removed"]) == 2 for n, r in causal["runs"].items()
                                                  if n != "dense")
    assert causal["scores"]["split"] == "train" and causal["provenance"]["split"] == "test"


def test_evaluate_prints_and_keeps_rulers_score_where_it_differs_from_the_accuracy(lmdir, monkeypatch, capsys):
    from pruning_core.tasks import long_context
    assert run("evaluate", "lm", "--task", "frequent-words", "--context", 600, "--limit", 2, "--out", "a.json") == 0
    plain = json.loads((lmdir / "a.json").read_text())
    assert plain["extra"]["ruler_score"] == plain["metric"] and "RULER's score" not in capsys.readouterr().out
    monkeypatch.setattr(long_context, "partial_score", lambda kind, text, answers: 1 / 3)   # one of three found
    assert run("evaluate", "lm", "--task", "frequent-words", "--context", 600, "--limit", 2, "--out", "b.json") == 0
    partial = json.loads((lmdir / "b.json").read_text())
    assert partial["extra"]["ruler_scores"] == [1 / 3, 1 / 3] and partial["metric"] == plain["metric"]
    assert "RULER's score (string_match_all: the share of answers found) 33.3 %" in capsys.readouterr().out


def test_causal_test_refuses_scores_from_the_measured_split(lmdir, capsys):
    assert run("score", "lm", "--task", "niah-single", "--method", "gradient", "--score-split", "test", "--limit", 1,
               "--context", 512, "--out", "st.json") == 0
    assert run("causal-test", "lm", "--task", "niah-single", "--scores", "st.json", "--limit", 1) == 2
    assert "computed on split 'test'" in capsys.readouterr().err


def test_policy_for_another_model_is_refused(lmdir, capsys):
    (lmdir / "bad.json").write_text(json.dumps({"format": "headprune.kv_policy/1", "sink": 1, "window": 2,
                                                "streaming": [[1, 0, 0]]}))
    assert run("evaluate", "lm", "--task", "niah-single", "--context", 640, "--limit", 1, "--kv-policy",
               "bad.json") == 2
    assert "key/value heads per layer" in capsys.readouterr().err


def _roles_file(path, layout) -> None:
    """A roles file whose induction and retrieval scores rank the heads in opposite orders."""
    import numpy as np

    from pruning_core.analysis.roles import RoleReport
    grid = np.array([[0.1, 0.9, 0.2, 0.3], [0.8, 0.0, 0.05, 0.4]])
    report = RoleReport(layout, {"induction": {"decoder_self": grid}, "retrieval": {"decoder_self": 1.0 - grid}},
                        {"induction": 0.4, "retrieval": 0.1}, {},
                        {"task": "movie-sentiment", "split": "validation"})
    path.write_text(json.dumps(report.to_json()))


def test_causal_test_on_an_in_context_task_removes_the_top_heads_of_the_named_role(lmdir, capsys):
    from long_context_tiny import long_loaded
    _roles_file(lmdir / "roles.json", long_loaded("llama").layout)
    assert run("evaluate", "lm", "--task", "icl-recursion", "--limit", 2, "--out", "e.json") == 0
    assert json.loads((lmdir / "e.json").read_text())["extra"]["kind"] == "recursion ABBB"
    top = {}
    for role in ("induction", "retrieval"):
        assert run("causal-test", "lm", "--task", "icl-recursion", "--scores", "roles.json", "--role", role,
                   "--top", 0.25, "--seeds", 2, "--limit", 3, "--out", f"c-{role}.json") == 0
        causal = json.loads((lmdir / f"c-{role}.json").read_text())
        assert causal["scores"]["method"] == f"role:{role}" and causal["n_examples"] == 3
        assert causal["provenance"]["task"] == "icl-recursion" and causal["provenance"]["split"] == "test"
        top[role] = {tuple(h) for h in causal["runs"]["top"]["removed"]}
        assert all(len(causal["runs"][f"random-{s}"]["removed"]) == 2 for s in (0, 1))
    assert top["induction"] == {("decoder_self", 0, 1), ("decoder_self", 1, 0)}      # scores 0.9 and 0.8
    assert top["retrieval"] == {("decoder_self", 1, 1), ("decoder_self", 1, 2)}      # 1 - scores: 1.0 and 0.95
    assert run("causal-test", "lm", "--task", "icl-recursion", "--scores", "roles.json", "--limit", 1) == 2
    assert "name the role whose scores to use with --role" in capsys.readouterr().err


def test_kv_policy_export_and_import_round_trip(workdir, capsys):
    """kv-policy-export writes DuoAttention's folder, kv-policy-import reads it back to the same policy."""
    from pruning_core.modeling.kv import kv_policy as kvp
    policy = kvp.random_policy((2, 2, 2), 0.5, seed=3, sink=8, window=32)
    (workdir / "p.json").write_text(json.dumps(policy.to_json({"model": "lm"})))
    assert run("kv-policy-export", "p.json", "--format", "duo", "--out", "duo") == 0
    assert "head_compression_ratio=0.5" in capsys.readouterr().out
    assert sorted(p.name for p in (workdir / "duo").iterdir()) == ["config.json", "full_attention_heads.tsv"]
    assert run("kv-policy-import", "duo", "--out", "back.json") == 0
    back = kvp.load_policy(workdir / "back.json")
    assert back == policy and back.source["method"] == "duo-attention"
    assert run("kv-policy-export", "p.json", "--out", "duo") == 2                 # an existing folder is refused
    assert "not empty" in capsys.readouterr().err


def test_every_head_streaming_on_a_long_document_the_sink_ablation_path(lmdir, monkeypatch, capsys):
    from pruning_core.tasks.data import bible
    text = " ".join(f"Verse {i} of the book, and the words go on." for i in range(40))       # ~1,700 byte tokens
    monkeypatch.setattr(bible, "book_text", lambda book: text)
    assert run("evaluate", "lm", "--task", "bible-book-lm", "--context", 512, "--out", "full.json") == 0
    full = json.loads((lmdir / "full.json").read_text())
    assert full["metric_name"] == "perplexity" and full["extra"]["stride"] == 256       # half the context
    ppl = {}
    for sink in (0, 4):
        assert run("kv-policy", "--all", "--model", "lm", "--sink", sink, "--window", 64, "--context", 512,
                   "--out", f"all-{sink}.json") == 0
        policy = json.loads((lmdir / f"all-{sink}.json").read_text())
        assert policy["n_streaming"] == policy["n_heads"] == 4 and policy["source"]["method"] == "all"
        assert run("evaluate", "lm", "--task", "bible-book-lm", "--context", 512, "--kv-policy", f"all-{sink}.json",
                   "--out", f"e-{sink}.json") == 0
        ppl[sink] = json.loads((lmdir / f"e-{sink}.json").read_text())["metric"]
    assert ppl[0] != ppl[4] != full["metric"]                  # the window cuts every target's context past 64 tokens
    assert run("kv-policy", "--all", "--model", "lm", "--window", 600, "--out", "wide.json") == 0
    assert run("evaluate", "lm", "--task", "bible-book-lm", "--context", 512, "--kv-policy", "wide.json",
               "--out", "e-wide.json") == 0                   # a window wider than the context: the full cache
    assert json.loads((lmdir / "e-wide.json").read_text())["metric"] == pytest.approx(full["metric"], rel=1e-5)
    capsys.readouterr()
    assert run("kv-policy", "--all", "--random", 0, "--model", "lm", "--out", "x.json") == 2
    assert "--all streams every key/value head" in capsys.readouterr().err
    assert run("kv-policy", "--random", 0, "--model", "lm", "--out", "x.json") == 2
    assert "--stream 0.5" in capsys.readouterr().err
