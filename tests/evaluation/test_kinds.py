"""Michel et al. §5: a share of one kind's heads removed at a time, the other kinds untouched."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from pruning_core.cli.main import main
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadLayout, HeadMask, HeadScores
from pruning_core.evaluation.kinds import (KindSensitivity, borrow, kind_sensitivity, least_important_of_kind,
                                           missing_note, source_label)
from tiny import make_bert_tokenizer, random_words_csv, tiny_model


class KeptShareTask:
    """A stand-in task whose accuracy is the share of ``cross`` heads kept (cross is all that matters),
    recording every mask it is given."""

    name = "kept-share"

    def __init__(self) -> None:
        self.masks: list[HeadMask | None] = []

    def evaluate(self, loaded, data, mask, batch_size=64):
        self.masks.append(mask)
        kept = 1.0 if mask is None else sum(map(sum, mask.kinds["cross"])) / loaded.layout.total_of("cross")
        return SimpleNamespace(metric=kept, loss=1.0 - kept, interval=(kept - 0.1, kept + 0.1),
                               metric_name="accuracy")


def _loaded(kinds: dict) -> SimpleNamespace:
    layout = HeadLayout({k: tuple(rows) for k, rows in kinds.items()})
    layout_total = {k: sum(rows) for k, rows in kinds.items()}
    return SimpleNamespace(layout=SimpleNamespace(kinds=layout.kinds, total_of=layout_total.get,
                                                  heads=layout.heads, total_heads=layout.total_heads),
                           _layout=layout, device="cpu", model_id="stand-in", weights_sha256=None)


def _ranking(layout: HeadLayout) -> HeadScores:
    return HeadScores.from_lists({k: [[float(h + 10 * l) for h in range(n)] for l, n in enumerate(rows)]
                                  for k, rows in layout.kinds.items()})


def test_each_kind_is_cut_alone_and_the_sensitive_one_is_found():
    loaded = _loaded({"encoder_self": [4, 4], "cross": [4, 4]})         # an SSRU decoder: no decoder_self heads
    task, data = KeptShareTask(), SimpleNamespace(split="test", n_examples=10)
    result = kind_sensitivity(loaded, task, data, _ranking(loaded._layout), fractions=(0.25, 0.5), seeds=2)
    assert result.missing == ("decoder_self",) and set(result.heads) == {"encoder_self", "cross"}
    assert len(result.points) == 2 * 2 * (1 + 2)                        # kinds x fractions x (importance + seeds)
    for mask in task.masks[1:]:                                         # the other kinds keep every head
        removed_kinds = {k for k, rows in mask.kinds.items() for row in rows for kept in row if not kept}
        assert len(removed_kinds) == 1
    half = [p for p in result.points if p.kind == "cross" and p.fraction == 0.5 and p.method == "importance"][0]
    assert half.heads_removed == 4 and half.metric == pytest.approx(0.5)
    assert result.most_sensitive("importance") == "cross" and result.most_sensitive("random") == "cross"
    assert result.worsening("encoder_self", "importance") == pytest.approx(0.0)
    least = [p for p in result.points if p.kind == "cross" and p.fraction == 0.25 and p.method == "importance"][0]
    assert least.heads_removed == 2
    assert KindSensitivity.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_least_important_of_kind_names_the_heads_the_importance_points_remove():
    loaded = _loaded({"encoder_self": [4, 4], "cross": [4, 4]})
    ranking, task = _ranking(loaded._layout), KeptShareTask()
    kind_sensitivity(loaded, task, SimpleNamespace(split="test", n_examples=10), ranking, fractions=(0.5,), seeds=0)
    cross_half = task.masks[2]                                           # base, encoder_self 0.5, cross 0.5
    least = least_important_of_kind(ranking, "cross", 0.5)
    assert sorted(least) == sorted(cross_half.removed())
    assert least == [("cross", 0, 0), ("cross", 0, 1), ("cross", 0, 2), ("cross", 0, 3)]   # the lowest scores first


def test_a_missing_kind_is_said_in_words():
    assert missing_note(()) == ""
    assert missing_note(("decoder_self",)) == ("This model has no decoder self-attention heads, so that kind is "
                                               "not measured.")


def test_bad_shares_are_refused_with_an_example():
    loaded = _loaded({"encoder_self": [2]})
    with pytest.raises(HeadpruneError, match="e.g. 0.1,0.25,0.5"):
        kind_sensitivity(loaded, KeptShareTask(), SimpleNamespace(split="test", n_examples=1),
                         _ranking(loaded._layout), fractions=(0.0, 2.0))


@pytest.fixture
def tiny_cli(tmp_path, monkeypatch):
    """The working folder holds a tiny BERT (``tiny``) and its text file (``tiny.csv``); returns the folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HEADPRUNE_HOME", str(tmp_path / "home"))
    tiny_model("bert").save_pretrained(tmp_path / "tiny")
    make_bert_tokenizer(tmp_path / "tiny")
    random_words_csv(tmp_path / "tiny.csv", rows=16, words_per_row=6)
    return tmp_path


def test_cli_kinds_on_an_encoder(tiny_cli, capsys):
    tmp_path = tiny_cli
    assert main(["kinds", "tiny", "--task", "file:tiny.csv", "--score-split", "test", "--fractions", "0.5",
                 "--seeds", "1", "--out", "k.json"]) == 0
    out = capsys.readouterr().out
    assert "most sensitive" not in out                                   # one kind: nothing to compare
    assert "This model has no decoder self-attention and encoder-decoder (cross) attention heads" in out
    result = KindSensitivity.from_json(json.loads((tmp_path / "k.json").read_text()))
    assert result.missing == ("decoder_self", "cross") and len(result.points) == 2
    assert main(["kinds", "tiny", "--task", "file:tiny.csv", "--score-split", "test", "--fractions", "half"]) == 2
    assert "--fractions takes shares separated by commas" in capsys.readouterr().err


def test_only_the_chosen_kinds_are_measured_and_an_absent_one_is_refused():
    loaded = _loaded({"encoder_self": [4, 4], "cross": [4, 4]})
    task, data = KeptShareTask(), SimpleNamespace(split="test", n_examples=10)
    result = kind_sensitivity(loaded, task, data, _ranking(loaded._layout), fractions=(0.5,), seeds=1, kinds=["cross"])
    assert result.heads == {"cross": 8} and result.missing == ("decoder_self",)
    assert {p.kind for p in result.points} == {"cross"} and len(task.masks) == 1 + 2
    with pytest.raises(HeadpruneError, match="no 'decoder_self' heads to remove; its kinds are encoder_self, cross"):
        kind_sensitivity(loaded, task, data, _ranking(loaded._layout), kinds=["decoder_self"])


class _WerTask(KeptShareTask):
    """A WER of 0.2 whatever the mask: a stand-in for another model's run, on another metric."""

    def evaluate(self, loaded, data, mask, batch_size=64):
        return SimpleNamespace(metric=0.2, loss=1.0, interval=None, metric_name="wer")


def _run(kinds: dict, model: str, task=None, measure=None) -> KindSensitivity:
    loaded = _loaded(kinds)
    loaded.model_id = model
    return kind_sensitivity(loaded, task or KeptShareTask(), SimpleNamespace(split="test", n_examples=4),
                            _ranking(loaded._layout), fractions=(0.5,), seeds=0, kinds=measure)


def test_a_missing_kind_is_borrowed_from_the_first_run_that_measured_it():
    own = _run({"encoder_self": [2], "cross": [2]}, "student")                  # no decoder self-attention
    encoder_only = _run({"encoder_self": [2]}, "encoder", _WerTask())
    speech = _run({"encoder_self": [2], "decoder_self": [2], "cross": [2]}, "speech", _WerTask(), ["decoder_self"])
    pairs = borrow(own, [encoder_only, speech, _run({"decoder_self": [2]}, "later", _WerTask())])
    assert pairs == ((own, ("encoder_self", "cross")), (speech, ("decoder_self",)))
    assert borrow(own, [encoder_only]) == ((own, ("encoder_self", "cross")),)      # nothing to fill: own alone
    assert source_label(speech) == "speech on kept-share, WER, 4 examples"


def test_cli_kinds_borrows_a_saved_run_and_refuses_a_wrong_file_before_any_work(tiny_cli, capsys):
    tmp_path = tiny_cli
    speech = _run({"encoder_self": [2], "decoder_self": [2], "cross": [2]}, "speech", _WerTask(), ["decoder_self"])
    (tmp_path / "speech.json").write_text(json.dumps(speech.to_json()))
    (tmp_path / "curve.json").write_text(json.dumps({"format": "headprune.curve/1"}))
    assert main(["kinds", "tiny", "--task", "file:tiny.csv", "--score-split", "test", "--fractions", "0.5",
                 "--seeds", "0", "--borrow", "speech.json"]) == 0
    out = capsys.readouterr().out
    assert "borrowed from speech on kept-share, WER, 4 examples (all heads: " in out
    assert out.count("decoder self-attention") >= 2 and "1 of   2 removed" in out
    assert main(["kinds", "tiny", "--task", "file:tiny.csv", "--borrow", "curve.json"]) == 2
    err = capsys.readouterr().err
    assert "--borrow curve.json: not a saved `headprune kinds` result" in err and "--out FILE.json" in err


def test_the_progress_counts_every_evaluation_the_one_with_all_heads_included():
    """The dashboard's button names kinds x shares x (1 + seeds) + 1 evaluations; the progress reaches that count."""
    loaded = _loaded({"encoder_self": [4, 4], "cross": [4, 4]})
    events = []
    result = kind_sensitivity(loaded, KeptShareTask(), SimpleNamespace(split="test", n_examples=10),
                              _ranking(loaded._layout), fractions=(0.25, 0.5), seeds=2, progress=events.append)
    assert [e.done for e in events] == list(range(1, 2 * 2 * (1 + 2) + 2))
    assert {e.total for e in events} == {len(result.points) + 1} == {13}
