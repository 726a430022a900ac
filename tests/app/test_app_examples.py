"""The per-example view: the examples a mask changes, with gold and both predictions;
confusion matrices; accuracy, F1 and MCC with intervals; and the loss change on the Head map with
its paired interval ("within noise" when it covers zero)."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest

from app.headmap import examples as view
from app.core import uncertainty
from browser_helpers import ROOT, app_env, ok
from pruning_core.tasks.per_example import ExampleOutputs

TIMEOUT = 120
EXAMPLES = "app_pages/examples.py"
HEAD_MAP = "app_pages/head_map.py"


def test_loss_change_interval_says_within_noise_only_when_it_covers_zero():
    dense = ExampleOutputs(tuple(0.5 + 0.01 * (i % 7) for i in range(60)), (1,) * 60)
    same = uncertainty.loss_change(dense, dense)
    assert same.within_noise and same.text.lstrip("+-").strip("0.") == ""
    worse = ExampleOutputs(tuple(x + 0.3 for x in dense.losses), (1,) * 60)
    shifted = uncertainty.loss_change(dense, worse)
    assert not shifted.within_noise and shifted.text.startswith("+0.3") and "95 % interval" in shifted.detail
    noisy = ExampleOutputs(tuple(x + (0.3 if i % 2 else -0.3) for i, x in enumerate(dense.losses)), (1,) * 60)
    assert uncertainty.loss_change(dense, noisy).within_noise


def test_changed_rows_and_confusion_matrices():
    dense = ExampleOutputs((0.1, 0.2, 0.3, 0.4), (1, 1, 1, 1), (0, 1, 1, 0))
    pruned = ExampleOutputs((0.1, 0.9, 0.3, 0.8), (1, 1, 1, 1), (0, 0, 1, 1))
    inputs = [{"text": f"t{i}", "label": 0} for i in range(4)]
    frame = view.changed_frame(inputs, [0, 1, 1, 1], dense, pruned, ("neg", "pos"))
    assert list(frame["#"]) == [1, 3] and list(frame["gold"]) == ["pos", "pos"]
    assert list(frame["all heads"]) == ["pos", "neg"] and list(frame["this mask"]) == ["neg", "pos"]
    matrix = view.confusion_frame([0, 1, 1, 0], [0, 0, 1, 1], ("neg", "pos"), "all heads", "this mask")
    assert matrix.loc["neg", "neg"] == 1 and matrix.loc["pos", "neg"] == 1 and matrix.to_numpy().sum() == 4
    names = set(view.metric_frame(["accuracy", "f1", "mcc"], dense, pruned, [0, 1, 1, 1])["metric"])
    assert names == {"accuracy", "F1", "MCC"}
    assert view.example_text({"text_a": "a", "text_b": "b", "label": 1}) == "a ‖ b"


def _app(tiny, home, monkeypatch, page: str, mask: str | None) -> AppTest:
    for key, value in app_env(tiny, home).items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
    if mask:
        at.query_params.update({"mask": mask})
    at.run()
    at.switch_page(page).run()
    return ok(at)


def test_per_example_page_lists_changed_answers_and_confusion(tiny_bert, tmp_path, monkeypatch):
    at = _app(tiny_bert, tmp_path / "home", monkeypatch, EXAMPLES, "e:1.1")       # one head per layer kept
    headers = [h.value for h in at.subheader]
    assert any(h.startswith("Answers changed by the mask:") for h in headers), headers
    changed = at.dataframe[0].value
    assert list(changed.columns[:5]) == ["#", "text", "gold", "all heads", "this mask"]
    assert (changed["all heads"] != changed["this mask"]).all()
    n_changed = int(headers[0].split(": ")[1].split(" of ")[0])
    n_total = int(headers[0].split(" of ")[1].split()[0])
    assert len(changed) == n_changed > 0
    metrics = at.dataframe[1].value
    assert {"accuracy", "F1", "MCC"} <= set(metrics["metric"]) and metrics["all heads"].str.contains(r"\(.+–.+\)").all()   # value (95 % interval)
    dense_vs_mask, gold_vs_mask = at.dataframe[2].value, at.dataframe[3].value
    assert dense_vs_mask.to_numpy().sum() == gold_vs_mask.to_numpy().sum() == n_total
    off_diagonal = dense_vs_mask.to_numpy().sum() - dense_vs_mask.to_numpy().trace()
    assert off_diagonal == n_changed


def test_per_example_page_with_all_heads_says_nothing_changes(tiny_bert, tmp_path, monkeypatch):
    at = _app(tiny_bert, tmp_path / "home", monkeypatch, EXAMPLES, None)
    assert any("All heads are kept" in i.value for i in at.info) and not at.dataframe


def test_head_map_loss_change_has_a_paired_interval(tiny_bert, tmp_path, monkeypatch):
    at = _app(tiny_bert, tmp_path / "home", monkeypatch, HEAD_MAP, "e:1.1")
    loss = next(m for m in at.metric if m.label == "loss")
    assert "95 % interval of the change" in loss.help and "paired bootstrap" in loss.help
    assert loss.delta and (loss.delta.startswith(("+", "-")) or "no change" in loss.delta)
    full = _app(tiny_bert, tmp_path / "home2", monkeypatch, HEAD_MAP, None)
    assert not next(m for m in full.metric if m.label == "loss").delta


def test_a_verse_shows_its_text_without_its_id_and_with_apostrophes():
    verse = {"source": "He hasn`t come ‖ yet", "target": "Ele ainda não veio", "ref": "43:1:2"}
    assert view.example_text(verse) == "He hasn't come ‖ yet"
    assert "43:1:2" not in view.example_text(verse) and "`" not in view.example_text(verse)


def test_sample_rows_pair_all_heads_with_the_mask():
    from types import SimpleNamespace

    dense = SimpleNamespace(extra={"samples": [{"source": "It`s light", "hypothesis": "É luz", "reference": "É a luz"},
                                               {"source": "b", "hypothesis": "B", "reference": "B"}]})
    pruned = SimpleNamespace(extra={"samples": [{"source": "It`s light", "hypothesis": "A luz da luz",
                                                 "reference": "É a luz"},
                                                {"source": "b", "hypothesis": "B", "reference": "B"}]})
    rows = view.sample_rows(dense, pruned)
    assert rows[0] == {"source": "It's light", "gold": "É a luz", "all heads": "É luz", "this mask": "A luz da luz",
                       "changed": True}
    assert rows[1]["changed"] is False
    assert view.sample_rows(SimpleNamespace(extra={}), SimpleNamespace(extra={})) == []     # a classifier keeps none
