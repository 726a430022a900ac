"""Numbers people can trust on the dashboard. A wrong-shape mask is refused at preview (in
test_app_pages_extra), every share bundle and report carries complete provenance, every metric shows
its 95 % interval and example count, deltas inside the noise say so, curves get a chance line, and
the small items of point 11. AppTest on tiny models (see test_app_pages.py)."""
from __future__ import annotations

import json

import pytest

from app.share import ui as share_ui
from browser_helpers import ok

SHARE, HEAD_MAP, MODEL_PAGE, CURVES = ("app_pages/share.py", "app_pages/head_map.py", "app_pages/model_data.py",
                                       "app_pages/curves.py")


pytestmark = pytest.mark.usefixtures("stand_in_scripts")


# -- provenance --------------------------------------------------------------------------------

def test_share_bundle_and_report_carry_split_examples_seeds_and_versions(app_for, tiny_bert_24, monkeypatch):
    made = []
    real = share_ui.gather_analysis
    monkeypatch.setattr(share_ui, "gather_analysis", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    ok(app_for(tiny_bert_24, SHARE, mask="e:7.f"))
    analysis = made[-1]
    data = json.loads(analysis.to_bytes())
    prov = data["provenance"]
    assert prov["split"] and prov["n_examples"] == 12
    assert prov["versions"]["torch"] and prov["settings"]["score_seed"] == 0
    for name in ("masked", "dense"):
        own = data["eval"][name]["provenance"]
        assert own["split"] == prov["split"] and own["n_examples"] == 12 and own["versions"] and own["task"]
    from app.share import report
    html = report.build_report(analysis)
    assert f"first 12 examples of the <b>{prov['split']}</b> split" in html


# -- intervals, example counts, "within noise", chance line -----------------------------------------

def test_uncertainty_rounds_to_what_the_interval_supports():
    from app.core import uncertainty
    from pruning_core.evaluation import stats
    from pruning_core.evaluation.metrics import get_metric
    from pruning_core.evaluation.results import EvalResult
    from pruning_core.evaluation.significance import compare

    wide = EvalResult("accuracy", 90 / 128, 0.5, 128, per_example=(1,) * 90 + (0,) * 38,
                      interval=stats.wilson_interval(90, 128))
    assert uncertainty.shown(wide) == uncertainty.Shown("70 %", "95 % interval 62–78 %, 128 examples")
    narrow = EvalResult("accuracy", 0.8534, 0.5, 100000, interval=(0.851, 0.856))
    assert uncertainty.shown(narrow).value == "85.3 %"
    assert uncertainty.shown(EvalResult("accuracy", 0.5, 0.5, 4)).interval == "4 examples, no interval"
    one_less = EvalResult("accuracy", 89 / 128, 0.5, 128, per_example=(1,) * 89 + (0,) * 39,
                          interval=stats.wilson_interval(89, 128))
    small = uncertainty.change(wide, one_less, compare(get_metric("accuracy"), wide, one_less, None))
    # shown "70 %" and "70 %": the change shown is their difference; the -0.78 points are in the detail
    assert small.within_noise and small.text == "0 points" and "McNemar" in small.detail
    half = EvalResult("accuracy", 0.5, 0.5, 128, per_example=(1,) * 64 + (0,) * 64,
                      interval=stats.wilson_interval(64, 128))
    big = uncertainty.change(wide, half, compare(get_metric("accuracy"), wide, half, None))
    assert not big.within_noise and big.text == "-20 points"
    assert uncertainty.majority_share([0, 1, 1, 1]) == 0.75
    assert uncertainty.majority_share(["a text"]) is None and uncertainty.majority_share([]) is None


def test_a_change_never_contradicts_the_values_it_is_the_difference_of():
    """115 → 117 right of 128, shown "90 %" → "91 %": the change reads "+1 point", the difference of the shown
    values (the unrounded 1.5625 points stay in the detail's interval)."""
    from app.core import uncertainty
    from pruning_core.evaluation import stats
    from pruning_core.evaluation.metrics import get_metric
    from pruning_core.evaluation.results import EvalResult
    from pruning_core.evaluation.significance import compare

    def right(k: int, order: tuple) -> EvalResult:
        return EvalResult("accuracy", k / 128, 0.5, 128, per_example=order, interval=stats.wilson_interval(k, 128))

    base = right(115, (1,) * 115 + (0,) * 13)
    other = right(117, (1,) * 115 + (1, 1) + (0,) * 11)           # two more right, none lost
    assert (uncertainty.shown(base).value, uncertainty.shown(other).value) == ("90 %", "91 %")
    moved = uncertainty.change(base, other, compare(get_metric("accuracy"), base, other, None))
    assert moved.text == "+1 point", moved                          # 91 - 90, not 100 * 2 / 128
    # where whole points agree with the values they stay whole: 70 % → 50 % is -20 points
    wide, half = right(90, (1,) * 90 + (0,) * 38), right(64, (1,) * 64 + (0,) * 64)
    assert uncertainty.change(wide, half, compare(get_metric("accuracy"), wide, half, None)).text == "-20 points"


def _plain(text: str) -> str:
    return text.replace("\\", "")


def test_head_map_metric_shows_interval_examples_and_a_noisy_delta_says_so(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, HEAD_MAP, mask="e:7.f"))       # one head of 8 removed, 12 examples
    shown = next(m for m in at.metric if m.label == "accuracy")
    assert "." not in shown.value                               # ± tens of points on 12 examples: whole points
    assert "95 % interval" in shown.help and "12 examples" in shown.help
    assert "within noise" in shown.proto.delta or "no change" in shown.proto.delta, shown.proto.delta
    captions = " ".join(_plain(c.value) for c in at.caption)
    assert "95 % interval" in captions and "12 examples" in captions and "All heads" in captions


def test_model_page_metric_shows_interval_and_examples(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, MODEL_PAGE))
    shown = next(m for m in at.metric if m.label.endswith("with all heads"))
    assert "." not in shown.value and "95 % interval" in shown.help and "12 examples" in shown.help
    assert any("95 % interval" in _plain(c.value) and "12 examples" in _plain(c.value) for c in at.caption)


def test_curves_chart_has_a_majority_class_line(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, CURVES))
    ok(next(b for b in at.button if b.label == "Compute the curves").click().run())   # curves start on a click
    figures = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if c.key is None]
    texts = [a.get("text", "") for f in figures for a in f["layout"].get("annotations", [])]
    assert any(t.startswith("majority class (") for t in texts), texts
    assert any("majority class" in _plain(c.value) for c in at.caption)


# -- smaller things -------------------------------------------------------------------------------------

def test_history_names_a_mask_restored_from_a_file(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SHARE))
    mask = {"format": "headprune.mask/1", "model": str(tiny_bert_24.model),
            "kinds": {"encoder_self": [[1, 0, 1, 1], [1, 1, 1, 1]]}}
    at.file_uploader(key="hp_w_share_upload").set_value(
        ("my_mask.json", json.dumps(mask).encode(), "application/json")).run()
    ok(at)
    at.button(key="hp_w_share_restore").click().run()
    ok(at)
    at.switch_page(HEAD_MAP).run()
    ok(at)
    captions = [_plain(c.value) for c in at.caption]
    assert any("mask restored from my_mask.json" in c for c in captions), captions
    assert not any("mask from the link" in c for c in captions)


def test_an_unreachable_hub_model_message_has_no_double_period(app_for, tiny_bert_24):
    """The config loader's own message ends with a period; ours did not strip it ("files.. The")."""
    at = ok(app_for(tiny_bert_24, MODEL_PAGE))                     # HF_HUB_OFFLINE=1: the hub cannot be reached
    at.radio(key="hp_w_model_source").set_value("hub")
    at.text_input(key="hp_w_model_where").set_value("nosuchorg/nosuchmodel")
    next(b for b in at.button if b.label == "Use this model").click().run()
    assert not at.exception
    errors = [_plain(e.value) for e in at.error]
    assert any("cannot be reached" in e and "spelling" in e for e in errors), errors
    assert not any(".." in e.replace("...", "") for e in errors), errors
    # the form keeps what was typed, so fixing one letter needs no retyping
    assert at.radio(key="hp_w_model_source").value == "hub"
    assert at.text_input(key="hp_w_model_where").value == "nosuchorg/nosuchmodel"
    at.run()                                                       # and on the next run too
    assert at.text_input(key="hp_w_model_where").value == "nosuchorg/nosuchmodel"


def test_an_unreadable_link_mask_message_has_no_double_period():
    from pruning_core.core.errors import FormatError
    from pruning_core.core.heads import HeadLayout
    from pruning_core.core.io.share_link import decode_mask

    for text in ("e:zz.ff", "q:f.f", "e:f"):
        try:
            decode_mask(text, HeadLayout({"encoder_self": (4, 4)}))
        except FormatError as exc:
            assert ".." not in str(exc).replace("...", ""), str(exc)


def test_attention_arrange_choice_survives_clearing_the_sentence(app_for, tiny_bert_24):
    """The Arrange radio and the chart stay together after the sentence is cleared and typed again."""
    at = ok(app_for(tiny_bert_24, "app_pages/attention.py", mask="e:7.f"))
    grid = at.get("plotly_chart")[0].proto.spec
    at.radio(key="hp_w_attention_arrange").set_value("grouped").run()
    grouped = at.get("plotly_chart")[0].proto.spec
    assert grouped != grid
    at.text_input(key="hp_w_attention_text").set_value("").run()
    ok(at)
    assert not at.get("plotly_chart")
    at.text_input(key="hp_w_attention_text").set_value("The plot was dull, but the acting was really great.").run()
    ok(at)
    radio = at.radio(key="hp_w_attention_arrange")
    assert radio.value == "grouped"
    assert at.get("plotly_chart")[0].proto.spec == grouped
    # the browser is told the choice again (it forgot the radio while it was hidden and would show the default)
    assert radio.proto.set_value and radio.proto.raw_value == "kept | removed", radio.proto


def test_report_cards_and_history_chart_carry_intervals():
    from app.headmap.figures import history_figure
    from app.share import report
    from app.share.analysis import Analysis
    from pruning_core.evaluation import stats
    from pruning_core.core.heads import HeadLayout, HeadMask
    from pruning_core.evaluation.results import EvalResult

    layout = HeadLayout({"encoder_self": (2,)})
    ev = EvalResult("accuracy", 90 / 128, 0.5, 128, interval=stats.wilson_interval(90, 128))
    html = report.build_report(Analysis(model_id="m", layout=layout, mask=HeadMask.full(layout), evaluation=ev,
                                        dense_evaluation=ev, provenance={"split": "validation"}))
    assert "70 % (95 % interval 62–78 %, 128 examples)" in html
    fig = history_figure([0.7, 0.6], ["a", "b"], 1, "accuracy", [(0.62, 0.78), (0.5, 0.7)])
    assert fig.data[0].error_y.array is not None and len(fig.data[0].error_y.array) == 2
