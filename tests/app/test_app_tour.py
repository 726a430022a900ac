"""The Tour page (app.tour.steps, app.tour.ui) headless on a tiny model: every step renders with its prepared
mask, each step's link opens that step and state in a fresh session, the tour's step stays out of
other pages' links, and the second model's steps say why they cannot run instead of failing. The
induction step on a tiny random Llama (its structure: random weights have no real induction head) and,
slow, on the prepared SmolLM2 (its known answer: removing the heads takes the second copy's drop away)."""
from __future__ import annotations

import json
import urllib.parse
from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.core.session import state
from app.tour import steps as tour
from browser_helpers import ROOT, TinyApp, app_env, build_tiny_app, ok
from pruning_core.modeling.sources import catalog
from pruning_core.core.heads import HeadMask
from pruning_core.evaluation.kinds import missing_note

TIMEOUT = 180
TOUR = "app_pages/tour.py"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_app(tmp_path_factory.mktemp("app-tour"), "bert")


def opener(monkeypatch, app: TinyApp, home: Path):
    """``start(query)``: an AppTest of the dashboard on ``app`` (headprune home ``home``), opened on the Tour
    page by a link whose query parameters are ``query``."""
    for key, value in app_env(app, home, eval_limit=12).items():
        monkeypatch.setenv(key, value)

    def start(query: dict[str, str] | None = None) -> AppTest:
        at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=TIMEOUT)
        at.query_params.update(query or {})
        at.run()
        return ok(at.switch_page(TOUR).run())
    return start


@pytest.fixture
def open_tour(monkeypatch, tmp_path, tiny):
    return opener(monkeypatch, tiny, tmp_path / "hp-home")


def params(at: AppTest) -> dict[str, str]:
    return {k: v[-1] if isinstance(v, list) else v for k, v in at.query_params.items()}


def heading(at: AppTest) -> str:
    return at.subheader[0].value


def shown_link(at: AppTest) -> str:
    links = [c.value for c in at.code if "/tour?" in c.value]
    assert len(links) == 1, [c.value for c in at.code]
    return links[0]


def test_every_step_renders_with_its_mask_and_its_link_opens_it(open_tour):
    at = open_tour()
    seen = []
    for n, step in enumerate(tour.STEPS):
        assert heading(at).startswith(f"Step {n + 1} of {len(tour.STEPS)} · {step.title}")   # step 1: + its data
        assert step.paragraph[:40] in " ".join(m.value for m in at.markdown)
        if "default" not in step.models or (step.task_types and "classification" not in step.task_types):
            assert any(step.not_on in i.value for i in at.info), f"{step.name}: no reason shown"   # translation,
            assert not at.get("page_link") and not any("Now click" in m.value for m in at.markdown)  # induction
        else:
            assert any(step.click in m.value for m in at.markdown), f"{step.name}: the one thing to click is missing"
            assert len(at.get("page_link")) == 1
        url = params(at)
        assert url["step"] == step.name and "mask" in url, url       # the prepared mask is the session's
        link = shown_link(at)
        assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query)) == url   # the link is the address bar
        seen.append(url["mask"])
        fresh = open_tour(url)                                       # a student opens the link
        assert heading(fresh) == heading(at) and params(fresh) == url
        assert fresh.session_state["hp_history"].current == at.session_state["hp_history"].current
        if n + 1 < len(tour.STEPS):
            ok(next(b for b in at.button if b.label.startswith("Next:")).click().run())
    assert not [b for b in at.button if b.label.startswith("Next:")]           # the last step has no next
    # the prepared masks: the costliest head alone (7 of 8), one head per layer (2 of 8), then half (4 of 8);
    # the translation and induction steps, which do not run on a classifier, leave the mask before them
    kept = [bin(int(m.split(":")[1].replace(".", ""), 16)).count("1") for m in seen]
    assert kept == [7, 2, 4, 4, 4, 4, 4], seen
    assert [s.name for s in tour.STEPS][3::2] == ["translation", "induction"]


def test_the_one_per_layer_table_speaks_to_a_reader(open_tour):
    """Issue 30 item 13: step 2's table showed 'kept_head', 'delta_metric' and a bare metric (61925.01)."""
    from apptest_helpers import assert_human_columns

    at = open_tour({"step": "one-per-layer"})
    frame = at.dataframe[0].value
    assert {"Layer", "Head kept", "Accuracy (%), this layer reduced", "Change in accuracy (points)"} <= set(frame.columns)
    assert_human_columns([frame])


def test_the_long_steps_carry_their_estimate_on_the_progress_bar(open_tour, monkeypatch):
    """The curve and one-head-per-layer steps start their jobs by themselves: each job's label (what its bar
    reads) says how long it takes, as the Curves page's buttons do."""
    from app.runtime import board

    labels: dict[str, str] = {}
    real = board.JobBoard.start

    def spy(self, name, label, *args, **kwargs):
        labels[name] = label
        return real(self, name, label, *args, **kwargs)
    monkeypatch.setattr(board.JobBoard, "start", spy)
    open_tour({"step": "one-per-layer"})
    open_tour({"step": "curve"})
    for job in (f"one_{tour.SCORER}", *(f"curve_{name}" for name in tour.CURVE_SCORERS)):
        assert job in labels and labels[job].endswith("on 2 CPU cores)") and "about " in labels[job], labels


def test_step_one_title_is_told_by_its_table():
    """17 of 64 heads of the translation model change BLEU significantly and one takes it from 32 to 8: the title
    says so, not "changes little"."""
    from pruning_core.evaluation.experiments import AblationResult, AblationRow

    rows = tuple(AblationRow("cross", i // 8, i % 8, 31.0, -1.0, 2.0, 0.1, significant=i < 17) for i in range(64))
    table = AblationResult("bleu", 32.0, 2.0, 128, rows)
    title = tour.one_head_title(table, "32", "8")
    assert title == "One head removed: 17 of 64 change BLEU significantly, the costliest takes it from 32 to 8"
    quiet = AblationResult("bleu", 32.0, 2.0, 128, tuple(replace(r, significant=False) for r in rows))
    assert tour.one_head_title(quiet, "32", "31") == "One head removed: none of the 64 changes BLEU significantly"


def test_the_tour_step_is_not_in_other_pages_links(open_tour):
    at = open_tour({"step": "curve"})
    assert params(at)["step"] == "curve"
    ok(at.switch_page("app_pages/head_map.py").run())
    assert "step" not in params(at) and "mask" in params(at)
    ok(at.switch_page(TOUR).run())
    assert params(at)["step"] == "curve"                              # the tour remembers where it was


def test_an_unknown_step_opens_the_first(open_tour):
    at = open_tour({"step": "no-such-step"})
    assert f"Step 1 of {len(tour.STEPS)} · {tour.STEPS[0].title}" in heading(at) and params(at)["step"] == tour.STEPS[0].name


def test_smollm2_steps_say_why_they_do_not_run(open_tour):
    at = open_tour()
    ok(at.radio(key="hp_w_tour_model").set_value("smollm2").run())
    assert at.session_state["hp_model"] == "smollm2" and at.session_state["hp_task"] == "movie-text"
    step_one = tour.runs_on(tour.STEPS[0], tour.tour_models(*state.defaults()))   # the picker's models
    assert "tiny" in step_one and "Bergamot" in step_one and "SmolLM2" not in step_one   # the tiny BERT, Bergamot
    assert any(i.value.startswith(step_one) for i in at.info)          # step 1 does not run on SmolLM2
    ok(next(b for b in at.button if b.label.startswith("Next:")).click().run())
    assert any("not prepared" in w.value for w in at.warning)           # an empty HEADPRUNE_HOME
    assert shown_link(at)                                                # the link and buttons still show


def induction_step(at: AppTest) -> tuple[list[tuple[str, int, int]], object]:
    """The induction step's detected heads (its table; none when it says so) and its loss table."""
    step = tour.step("induction")
    assert heading(at) == f"Step {tour.STEPS.index(step) + 1} of {len(tour.STEPS)} · {step.title}"
    assert any(step.click in m.value for m in at.markdown) and len(at.get("page_link")) == 1
    assert any(c.value == tour.REPEATED for c in at.code)                # the sentence the click asks for
    *heads_table, losses = [d.value for d in at.dataframe]
    current = at.session_state["hp_history"].current
    if heads_table:
        heads = [("decoder_self", int(l), int(h)) for l, h in zip(heads_table[0]["Layer"], heads_table[0]["Head"])]
    else:
        assert any("no induction head" in i.value for i in at.info)
        heads = []
    assert sorted(current.removed()) == sorted(heads)                    # the prepared mask removes exactly them
    assert list(losses["Heads"]) == ["all heads", f"{len(heads)} induction heads removed"]
    url = params(at)
    assert url["step"] == "induction" and ("mask" in url) == bool(heads)
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(shown_link(at)).query)) == url
    return heads, losses


def test_the_induction_step_on_a_tiny_language_model(monkeypatch, tmp_path, tiny_llama):
    start = opener(monkeypatch, tiny_llama, tmp_path / "hp-home")
    at = start({"step": "induction"})
    assert not [i for i in at.info if "needs a language model" in i.value]
    induction_step(at)
    fresh = start(params(at))                                             # a student opens the link
    assert heading(fresh) == heading(at) and params(fresh) == params(at)
    assert fresh.session_state["hp_history"].current == at.session_state["hp_history"].current


@pytest.mark.slow
def test_the_induction_step_on_smollm2_finds_heads_whose_removal_stops_copying(monkeypatch, tiny):
    if not catalog.get(tour.LM_MODEL).is_prepared():
        pytest.skip("smollm2 is not prepared: run `headprune prepare --model smollm2`")
    start = opener(monkeypatch, tiny, catalog.headprune_home())
    at = start({"step": "induction"})
    ok(at.radio(key="hp_w_tour_model").set_value("smollm2").run())
    heads, losses = induction_step(at)
    assert len(heads) >= 2 and all(17 <= l <= 23 for _, l, _ in heads), heads   # README: 8, in layers 17-23
    first, second = losses["Loss, first copy (nats)"], losses["Loss, second copy (nats)"]
    # the known answer (METHODS.md); measured 14.2 -> 3.1 nats with all heads, 14.2 -> 12.6 without them
    assert second[0] < first[0] - 5 and second[1] > second[0] + 5, losses


def test_the_speed_step_shows_only_a_timing_made_by_its_button(open_tour):
    """Step 6 named a button it does not have ("Measure again") and showed an older
    timing before its own button was pressed."""
    from app.headmap import latency as latency_ui

    at = open_tour({"step": "speed"})
    assert not [m for m in at.metric if m.label == "pruned vs dense"]
    ok(next(b for b in at.button if b.label == "Time dense vs pruned").click().run())
    assert [m for m in at.metric if m.label == "pruned vs dense"]
    captions = " ".join(c.value for c in at.caption)
    assert "does the same computation as dense" in captions and "are same computation" not in captions
    at.session_state["hp_w_tour_timed_mask"] = None             # the timing now counts as made elsewhere
    ok(at.run())
    assert at.session_state["hp_results"][latency_ui.RESULT][2]  # still stored for the Head map ...
    assert not [m for m in at.metric if m.label == "pruned vs dense"]   # ... but not shown as this step's answer
    assert "Measure again" not in " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("default_spec", [catalog.DEFAULT, tour.LM_MODEL, tour.MT_MODEL, "/some/folder"])
def test_the_model_picker_lists_each_model_once(default_spec):
    """A server started on SmolLM2 or on the translation model lists it once, as its default, with MiniLM-L6
    beside it (SmolLM2 was listed twice)."""
    models = tour.tour_models(default_spec, catalog.get(default_spec).task if default_spec in catalog.names()
                              else "movie-sentiment")
    assert [m.key for m in models] == ["default", "smollm2", "translation"]
    assert len({m.spec for m in models}) == len(models) and len({m.label for m in models}) == len(models)
    assert sum("default" in m.label for m in models) == 1
    assert default_spec in {m.spec for m in models}


# -- the translation step --------------------------------------------------------------------------
def translation_step(at: AppTest) -> HeadMask:
    """The translation step as shown: its figure, caption and click; returns the prepared mask."""
    step = tour.step("translation")
    assert heading(at) == f"Step {tour.STEPS.index(step) + 1} of {len(tour.STEPS)} · {step.title}"
    assert not at.info and not at.warning, [i.value for i in at.info] + [w.value for w in at.warning]
    figure = json.loads(next(c for c in at.get("plotly_chart") if c.key == "tour_kinds").proto.spec)
    names = {t.get("name") for t in figure["data"]}
    assert "decoder self-attention (48 heads, whisper-base)" in names, names     # Michel's third kind, borrowed
    caption = " ".join(c.value for c in at.caption)
    assert "Decoder self-attention: borrowed from whisper" in caption and "not the number chosen here" in caption
    assert "Most sensitive, least important first:" in caption and "; in random order: **" in caption
    assert f"{missing_note(('decoder_self',))[:-1]}: its decoder runs an SSRU" in caption   # the recurrence, named
    assert any(step.click in m.value for m in at.markdown)
    links = [link.proto.page for link in at.get("page_link")]
    assert links == ["head_map", "examples"], links          # the Per example page: the translations, verse by verse
    url = params(at)
    assert url["step"] == "translation" and "mask" in url
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(shown_link(at)).query)) == url
    return at.session_state["hp_history"].current


def test_the_translation_step_on_a_tiny_ssru_translation_model(monkeypatch, tmp_path, tiny, tiny_ssru):
    """A tiny Marian with an SSRU decoder stands in for the Bergamot student (``tour.TRANSLATION``); the
    server's default is the tiny BERT, so the translation model is picked in the model picker."""
    monkeypatch.setattr(tour, "TRANSLATION", replace(tour.TRANSLATION, spec=str(tiny_ssru.model), task=tiny_ssru.task))
    start = opener(monkeypatch, tiny, tmp_path / "hp-home")
    at = start({"step": "translation"})
    assert any(tour.step("translation").not_on in i.value for i in at.info)     # not on the BERT
    ok(at.radio(key="hp_w_tour_model").set_value("translation").run())
    mask = translation_step(at)
    removed = mask.removed()
    cross = sum(mask.layout.kinds["cross"])
    assert {k for k, _, _ in removed} == {"cross"} and len(removed) == round(tour.PRUNED_SHARE * cross), removed
    monkeypatch.delenv("HEADPRUNE_APP_EVAL_LIMIT")     # the picker chose the model's own size, as a new session does
    fresh = start(params(at))                                             # a student opens the link
    assert heading(fresh) == heading(at) and params(fresh) == params(at)
    assert translation_step(fresh) == mask
    assert fresh.radio(key="hp_w_tour_model").value == "translation"


def test_the_translation_step_says_how_to_prepare_the_model(open_tour):
    at = open_tour({"step": "translation"})                       # an empty HEADPRUNE_HOME: nothing prepared
    ok(at.radio(key="hp_w_tour_model").set_value("translation").run())
    assert any(catalog.get(tour.MT_MODEL).command() in w.value for w in at.warning), [w.value for w in at.warning]
    assert shown_link(at) and not at.get("page_link")


@pytest.mark.slow
def test_the_translation_step_on_bergamot(monkeypatch, tiny):
    """The real student (12 evaluation examples): removed at random, cross-attention hurts translation most."""
    if not catalog.get(tour.MT_MODEL).is_prepared():
        pytest.skip(f"{tour.MT_MODEL} is not prepared: run `{catalog.get(tour.MT_MODEL).command()}`")
    start = opener(monkeypatch, tiny, catalog.headprune_home())
    at = start({"step": "translation"})
    ok(at.radio(key="hp_w_tour_model").set_value("translation").run())
    mask = translation_step(at)
    assert len(mask.removed()) == 8 and {k for k, _, _ in mask.removed()} == {"cross"}     # 8 of 16 cross heads
    assert "in random order: **encoder-decoder (cross) attention**" in " ".join(c.value for c in at.caption)


@pytest.mark.heavy
def test_every_step_on_a_tiny_translation_model_runs_or_says_why(monkeypatch, tmp_path, tiny_ssru):
    """The steps the translation model is listed for render on a seq2seq model with two head kinds; the
    others say why not (naming the models they run on, or the task type the induction step needs)."""
    monkeypatch.setattr(tour, "TRANSLATION", replace(tour.TRANSLATION, spec=str(tiny_ssru.model), task=tiny_ssru.task))
    at = opener(monkeypatch, tiny_ssru, tmp_path / "hp-home")({"step": tour.STEPS[0].name})
    assert at.radio(key="hp_w_tour_model").value == "translation"      # the server's default, listed once
    for step in tour.STEPS:
        if "translation" in step.models and not step.task_types:
            assert any(step.click in m.value for m in at.markdown), f"{step.name}: the one thing to click is missing"
            assert not at.info, [i.value for i in at.info]
        else:
            why = "This step needs a language model." if step.task_types else "This step runs on **"
            assert any(i.value.startswith(why) and step.not_on in i.value for i in at.info), step.name
            assert not at.get("page_link")
        if step is not tour.STEPS[-1]:
            ok(next(b for b in at.button if b.label.startswith("Next:")).click().run())
