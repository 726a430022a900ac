"""The Head map's live panel and the Speed page tell no false speed story .

- a full mask is never timed or compared ("all heads kept: same model as dense"), also after Reset;
- a latency says when and under what load it was measured, and is judged by ``speed_verdict``;
- while the metric and the latency of a new mask are computed, the panel already shows the new
  mask's heads kept and marks the rest "updating…" (snapshotted in the middle of the run);
- a zero change has no arrow and no colour; no pruned-model zip for a full mask;
- the speed chart's axes contain every point and IQR whisker.
"""
from __future__ import annotations

import pytest
from streamlit.proto.Metric_pb2 import Metric as MetricProto
from streamlit.testing.v1.element_tree import parse_tree_from_messages

from app.speed import figures as speed
from app.core import ui
from app.core.text import measured_text
from app.runtime.work import Work
from apptest_helpers import button, click_head, metric
from browser_helpers import ok
from pruning_core.bench import MASKED_TEXT, benchmark, half_mask
from tiny import tiny_loaded

HEAD_MAP, SPEED, SHARE = "app_pages/head_map.py", "app_pages/speed.py", "app_pages/share.py"


def texts(at_or_tree) -> list[str]:
    """Every visible text of the page: markdown, captions, alerts, metric labels, values and deltas."""
    out = []
    for kind in ("markdown", "caption", "info", "warning", "success", "error"):
        out += [e.value for e in at_or_tree.get(kind)]
    for m in at_or_tree.get("metric"):
        out += [m.label, m.proto.body, m.proto.delta]
    return out


def speed_claims(at) -> list[str]:
    intro_free = [t for t in texts(at) if "Each square is one attention head" not in t]
    return [t for t in intro_free if "speed-up" in t.lower() or "x faster" in t.lower() or "× faster" in t.lower()]


def test_a_full_mask_shows_no_speed_up_also_after_reset(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, HEAD_MAP))
    assert speed_claims(at) == []
    assert any("all heads kept: same model as dense" in t.lower() for t in texts(at))
    assert "pruned vs dense" not in [m.label for m in at.metric]
    assert not any(".." in t.replace("...", "") for t in texts(at))          # no double period

    ok(click_head(at, "encoder_self", 0, 1))
    assert metric(at, "heads kept") == "7 / 8"
    verdict = metric(at, "pruned vs dense")
    assert verdict == "within noise" or verdict.startswith("at most") or "x faster" in verdict or "slower" in verdict
    caption = next(t for t in texts(at) if "interleaved" in t)
    assert "measured at" in caption and "UTC" in caption and "load average" in caption and MASKED_TEXT in caption
    assert [b.label for b in at.button].count("Measure again") == 1     # the button a busy timing's warning names

    ok(button(at, "Reset").click().run())                 # the old figure once came back after Reset
    assert metric(at, "heads kept") == "8 / 8"
    assert speed_claims(at) == [] and "pruned vs dense" not in [m.label for m in at.metric]
    ok(button(at, "Undo").click().run())                  # back to the measured mask: its own measurement
    assert metric(at, "heads kept") == "7 / 8" and "pruned vs dense" in [m.label for m in at.metric]


def test_the_panel_marks_values_as_updating_while_they_are_computed(app_for, tiny_bert_24, monkeypatch):
    at = ok(app_for(tiny_bert_24, HEAD_MAP))
    snapshots: dict[str, list[str]] = {}
    original = Work.show

    def spying(self, *args, **kwargs):
        if self.job in ("eval", "latency"):
            from streamlit.runtime.scriptrunner import get_script_run_ctx
            runner = get_script_run_ctx()._enqueue.__self__
            snapshots[self.job] = texts(parse_tree_from_messages(runner.forward_msgs()))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Work, "show", spying)
    ok(click_head(at, "encoder_self", 1, 2))
    for job in ("eval", "latency"):
        seen = snapshots[job]
        assert "7 / 8" in seen and "8 / 8" not in seen           # heads kept is the new mask's, at once
        assert any("updating…" in t for t in seen), (job, seen)
    assert not any("updating…" in t for t in texts(at))          # all filled in at the end
    assert metric(at, "heads kept") == "7 / 8"


def test_a_zero_change_has_no_arrow_and_no_colour():
    assert ui.is_zero_text("+0.0 points") and ui.is_zero_text("-0.0000") and not ui.is_zero_text("+0.1 points")
    zero = ui.delta_kwargs("+0.0 points")
    assert zero["delta_color"] == "off" and zero["delta_arrow"] == "off" and "+" not in zero["delta"]
    assert ui.delta_kwargs("-1.5 points", "normal") == {"delta": "-1.5 points", "delta_color": "normal"}
    assert ui.delta_kwargs(None) == {"delta": None}


def test_the_page_shows_a_zero_change_in_grey(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, HEAD_MAP))
    ok(click_head(at, "encoder_self", 0, 0))
    zero = [m for m in at.metric if m.proto.delta and ui.is_zero_text(m.proto.delta.split(" (")[0])]
    for m in zero:
        assert m.proto.color == MetricProto.MetricColor.GRAY and "no change" in m.proto.delta


def test_no_pruned_model_zip_for_a_full_mask(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SHARE))
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels and not any(label.startswith("Pruned model") for label in labels)
    assert any("all heads are kept" in c.value for c in at.caption)
    assert not any(".." in t.replace("...", "") for t in texts(at))          # no double period


def test_speed_page_judges_each_batch_and_calls_masked_the_same_computation(app_for, tiny_bert_24):
    at = ok(app_for(tiny_bert_24, SPEED, mask="e:3.c"))
    at.multiselect(key="hp_w_speed_batches").set_value([1, 2])
    at.selectbox(key="hp_w_speed_seq").set_value(16)
    at.button(key="hp_w_speed_run").click().run()
    ok(at)
    table = at.dataframe[0].value
    assert set(table.loc[table["variant"] == "masked", "vs dense"]) == {MASKED_TEXT}
    assert "speed-up" not in table.columns                        # no bare ratio column to misread
    lines = [t for t in texts(at) if "batch 1:" in t and "batch 2:" in t]
    assert lines and "measured at" in " ".join(c.value for c in at.caption)


def test_speed_chart_axes_contain_every_point_and_whisker(tmp_path):
    loaded = tiny_loaded("bert", tmp_path)
    result = benchmark(loaded, half_mask(loaded.layout), batch_sizes=(1, 4), warmup=0, repeats=3, min_seconds=0.0,
                       seq_len=8, measure_memory=False)
    fig = speed.speed_figure(result)
    for trace in fig.data:
        axis = fig.layout["yaxis2" if trace.yaxis == "y2" else "yaxis"]
        lo, hi = axis.range
        ups = trace.error_y.array if trace.error_y and trace.error_y.array is not None else [0] * len(trace.y)
        downs = trace.error_y.arrayminus if trace.error_y and trace.error_y.arrayminus is not None else [0] * len(trace.y)
        for y, up, down in zip(trace.y, ups, downs):
            assert lo <= y - down and y + up <= hi, (trace.name, y, up, down, axis.range)
        xlo, xhi = fig.layout["xaxis2" if trace.xaxis == "x2" else "xaxis"].range
        import math
        assert all(xlo < math.log10(x) < xhi for x in trace.x)
    names = [t.name for t in fig.data]
    assert "masked / dense" not in names and any(MASKED_TEXT in (n or "") for n in names)


def test_with_one_batch_size_the_ceiling_is_drawn_and_memory_named(tmp_path):
    """A line through one point draws nothing: with one batch size the FLOP ceiling is a marker on both panels, and
    the caption names what was not measured (peak memory), not a bare "not measured"."""
    loaded = tiny_loaded("bert", tmp_path)
    result = benchmark(loaded, half_mask(loaded.layout), batch_sizes=(4,), warmup=0, repeats=2, min_seconds=0.0,
                       seq_len=8, measure_memory=False)
    ceilings = [t for t in speed.speed_figure(result).data if (t.name or "").startswith("FLOP ceiling")]
    assert len(ceilings) == 2 and all("markers" in t.mode and t.marker.size >= 20 for t in ceilings)
    assert speed.memory_text(result) == "peak memory not measured (the sweep timed latency only)"
    assert all("lines" == t.mode for t in speed.speed_figure(
        benchmark(loaded, half_mask(loaded.layout), batch_sizes=(1, 4), warmup=0, repeats=2, min_seconds=0.0,
                  seq_len=8, measure_memory=False)).data if (t.name or "").startswith("FLOP ceiling"))


def test_measured_text_says_when_and_under_what_load(tmp_path):
    import dataclasses
    import datetime as dt

    loaded = tiny_loaded("bert", tmp_path)
    result = benchmark(loaded, half_mask(loaded.layout), batch_sizes=(1,), warmup=0, repeats=2, min_seconds=0.0,
                       seq_len=8, measure_memory=False)
    result = dataclasses.replace(result, provenance={**result.provenance, "created": "2026-01-02T10:00:00+00:00"},
                                 machine={"cpus": 2, "load_before": [3.5, 1, 1], "load_after": [4.25, 1, 1]})
    text = measured_text(result, dt.datetime(2026, 1, 2, 10, 5, tzinfo=dt.timezone.utc))
    assert text == "measured at 10:00:00 UTC (5 min ago); load average 3.50 before, 4.25 after, on 2 CPUs"
    assert "unknown time" in measured_text(dataclasses.replace(result, provenance={}))


# -- work proportional to what changed ------------------------------------------------------
def _wait_until(condition, timeout_s: float = 30) -> None:
    import time as time_

    deadline = time_.time() + timeout_s
    while not condition():
        assert time_.time() < deadline, "timed out"
        time_.sleep(0.01)


def test_the_gate_runs_one_at_a_time_and_evaluations_before_timings():
    import threading
    import time as time_

    from app.runtime.board import Gate
    from pruning_core.core.errors import Cancelled

    gate, order, inside, most = Gate(), [], [0], [0]

    def work(name: str, urgent: bool) -> None:
        with gate.hold(urgent=urgent):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            order.append(name)
            time_.sleep(0.05)
            inside[0] -= 1

    with gate.hold(urgent=True):              # busy: everything below queues
        threads = [threading.Thread(target=work, args=("timing", False))]
        threads[0].start()
        _wait_until(lambda: gate.waiting == 1)    # the timing waits first ...
        threads += [threading.Thread(target=work, args=(f"eval{i}", True)) for i in range(3)]
        for t in threads[1:]:
            t.start()
        _wait_until(lambda: gate.waiting == 4)
    for t in threads:
        t.join(10)
    assert most[0] == 1                                   # never two at once
    assert order[-1] == "timing" and sorted(order[:3]) == ["eval0", "eval1", "eval2"]   # ... but goes last

    def cancel(event):
        assert event.stage == "queued"
        raise Cancelled("a newer click")

    with gate.hold(urgent=True):
        with pytest.raises(Cancelled):        # a replaced job leaves the queue without running
            with gate.hold(urgent=True, progress=cancel):
                raise AssertionError("ran while the gate was held")
    assert gate.waiting == 0
    with gate.hold(urgent=False):             # and the gate is free again
        pass


def test_the_latency_probe_keeps_a_call_small_on_large_models(tiny_bert_24):
    """Eight sequences of 64 tokens for small models, fewer for large ones (at most :data:`PROBE_FLOP` a call), one
    shorter sequence where one of 64 is more (never under :data:`PROBE_MIN_TOKENS`), one utterance for speech."""
    from types import SimpleNamespace

    import torch

    from app.headmap.cache import LATENCY_SEQ_LEN, PROBE_FLOP, PROBE_MIN_TOKENS, probe_shape
    from app.model import cache

    assert probe_shape(cache.load(str(tiny_bert_24.model))) == (8, LATENCY_SEQ_LEN)

    def sized(parameters: int):
        model = torch.nn.Linear(1, 1)
        model.config = SimpleNamespace(max_position_embeddings=4096)
        model.weight = torch.nn.Parameter(torch.empty(parameters - 1, device="meta"))   # counted, never allocated
        return SimpleNamespace(model=model)

    for parameters, shape in ((22_700_000, (8, 64)), (134_500_000, (2, 64)), (312_000_000, (1, 64)),
                              (494_000_000, (1, 40)), (7_000_000_000, (1, PROBE_MIN_TOKENS))):
        batch, tokens = probe_shape(sized(parameters))
        assert (batch, tokens) == shape and tokens <= LATENCY_SEQ_LEN, parameters
        assert 2 * parameters * tokens * batch <= PROBE_FLOP or tokens == PROBE_MIN_TOKENS


def test_work_cancelled_while_it_lets_a_click_through_leaves_the_gate_to_the_click():
    import threading

    from app.runtime.board import Gate
    from pruning_core.core.errors import Cancelled

    gate, clicked, holding, release, entered = Gate(), threading.Event(), threading.Event(), threading.Event(), []
    cancelled = threading.Event()

    def cancel_when_told(event):
        if cancelled.is_set():
            raise Cancelled("the user clicked Cancel")

    def click() -> None:
        with gate.hold(urgent=True):
            holding.set()
            release.wait(10)

    def timing() -> None:
        with gate.hold(urgent=False):
            clicked.wait(10)
            with pytest.raises(Cancelled):
                while True:                    # a timing's pause: the click goes first, then the cancel comes
                    gate.yield_to_urgent(cancel_when_told)

    def other() -> None:
        with gate.hold(urgent=False):
            entered.append(holding.is_set() and not release.is_set())

    background = threading.Thread(target=timing)
    background.start()
    _wait_until(lambda: gate._busy)
    first = threading.Thread(target=click)
    first.start()
    _wait_until(lambda: gate.waiting == 1)
    clicked.set()
    _wait_until(holding.is_set)               # the timing let the click through ...
    cancelled.set()                           # ... and is cancelled while it waits to go on
    background.join(10)
    assert not background.is_alive()
    late = threading.Thread(target=other)
    late.start()
    late.join(0.5)
    assert late.is_alive() and not entered    # the click still holds the gate: nobody else is let in
    release.set()
    for t in (first, late):
        t.join(10)
    assert entered == [False] and not gate._busy and gate.waiting == 0


def test_letting_urgent_work_through_outside_the_gate_changes_nothing():
    from app.runtime.board import Gate

    gate = Gate()
    gate._urgent_waiting = 1                  # as if a click waited
    assert gate.yield_to_urgent() is False    # not this thread's gate to give
    gate._urgent_waiting = 0
    with gate.hold(urgent=False):
        assert gate._busy
    assert not gate._busy


def test_the_live_latency_times_dense_and_pruned_on_one_pruned_copy_per_mask(tiny_bert_24, monkeypatch):
    from app.headmap import cache as cache_headmap
    from app.model import cache
    from pruning_core.modeling import pruning
    from pruning_core.modeling.sources.loading import weights_hash_of_module

    monkeypatch.setattr(cache_headmap, "LATENCY_ROUNDS", 2)
    made = []
    original = pruning.prune_heads
    monkeypatch.setattr(pruning, "prune_heads",
                        lambda model, mask, **kw: made.append(mask) or original(model, mask, **kw))
    spec = str(tiny_bert_24.model)
    shared = cache.load(spec)
    before = weights_hash_of_module(shared.model)
    mask = half_mask(shared.layout, seed=2)
    first, second = cache_headmap.latency(spec, mask), cache_headmap.latency(spec, mask)
    assert made == [mask]                                         # one copy for both timings
    assert first.variants == second.variants == ("dense", "pruned")   # the two variants the panel shows
    assert weights_hash_of_module(shared.model) == before          # the shared model untouched
    # timed as `headprune bench` and a deployed model run it; the shared model keeps eager attention for its maps
    assert first.attn_implementation == "sdpa" and shared.model.config._attn_implementation == "eager"
    assert weights_hash_of_module(cache.timing(spec).model) == before and cache.timing(spec).model is not shared.model
    copy, timed = cache_headmap.pruned_model(spec, mask), cache.timing(spec).model
    assert copy.get_input_embeddings().weight is timed.get_input_embeddings().weight    # no second model in memory
    cache_headmap.pruned_model.clear()


def test_the_live_latency_lets_a_click_through_between_its_rounds(tiny_bert_24, monkeypatch):
    """A class: one session's latency timing holds the CPU gate; another session's click (an urgent
    evaluation) runs between two timing rounds, not after the whole timing."""
    import threading

    from app.runtime import board
    from app.headmap import cache as cache_headmap
    from app.model import cache
    from pruning_core.bench import timing

    monkeypatch.setattr(board, "GATE", board.Gate())
    monkeypatch.setattr(cache_headmap, "LATENCY_ROUNDS", 40)
    monkeypatch.setattr(cache_headmap, "LATENCY_BUDGET_S", 600.0)  # rounds, not seconds: load must not cut them short
    spec = str(tiny_bert_24.model)
    mask = half_mask(cache.load(spec).layout, seed=3)
    order, started = [], threading.Event()
    original = timing.report

    def noting(progress, stage, done, total, message):       # each round starts with a report
        started.set()
        order.append(message)
        return original(progress, stage, done, total, message)

    monkeypatch.setattr(timing, "report", noting)
    worker = threading.Thread(target=lambda: cache_headmap.latency(spec, mask))
    worker.start()
    assert started.wait(60)
    with board.GATE.hold(urgent=True):
        order.append("click")
    worker.join(120)
    rounds = [o for o in order if o.startswith("round")]
    assert len(rounds) >= 40 and order.index("click") < order.index(rounds[-1])   # not after every round
    cache_headmap.pruned_model.clear()


@pytest.mark.parametrize("job", ["latency", "estimate", "speed sweep"])
def test_timings_touch_the_model_only_in_the_cpu_queue(tiny_bert_24, monkeypatch, job):
    """A timing queued behind a click does nothing before its turn: not even the timing copy (on Qwen2.5-0.5B the
    first copies 2 GB, which beside a click's evaluation would slow it)."""
    import threading

    from app.headmap import cache as cache_headmap
    from app.model import cache
    from app.runtime import board
    from app.speed import cache as cache_speed

    monkeypatch.setattr(board, "GATE", board.Gate())
    spec = str(tiny_bert_24.model)
    mask = half_mask(cache.load(spec).layout, seed=4)
    asked = []
    for module in (cache_headmap, cache_speed):
        monkeypatch.setattr(module, "timing", lambda s, _real=cache.timing: asked.append(s) or _real(s))
    cache_headmap.latency_model.clear()
    run = {"latency": lambda: cache_headmap.latency(spec, mask),
           "estimate": lambda: cache_headmap.latency_model(spec),
           "speed sweep": lambda: cache_speed.speed_sweep(spec, mask, (1,), 16, "cpu")}[job]
    done = []
    worker = threading.Thread(target=lambda: done.append(run()))
    with board.GATE.hold(urgent=True):                          # a click holds the CPU
        worker.start()
        while board.GATE.waiting == 0 and worker.is_alive():    # until the timing is in line behind it
            worker.join(0.01)
        assert asked == [] and done == []
    worker.join(120)
    assert asked and len(done) == 1
    cache_headmap.pruned_model.clear()
    cache_headmap.latency_model.clear()


def test_a_click_evaluates_only_the_new_mask_not_the_history(app_for, tiny_bert_24, monkeypatch):
    from app.model import cache

    at = ok(app_for(tiny_bert_24, HEAD_MAP))
    for layer, head in ((0, 0), (0, 1)):
        ok(click_head(at, "encoder_self", layer, head))
    asked = []
    original = cache.evaluate
    monkeypatch.setattr(cache, "evaluate", lambda sel, mask, *rest, **kw: asked.append(
        None if mask is None or mask.is_full() else mask.n_kept) or original(sel, mask, *rest, **kw))
    ok(click_head(at, "encoder_self", 1, 3))
    assert metric(at, "heads kept") == "5 / 8"
    assert set(asked) <= {5, None}, asked          # the new mask (and all heads), never the 7- and 6-head steps
    assert len(at.get("plotly_chart")) == 2         # the map and the history chart, with every step shown ...
    history = next(e for e in at.get("plotly_chart") if e.key.endswith("history"))
    import json
    ys = json.loads(history.proto.spec)["data"][0]["y"]
    assert len(ys) == 4 and None not in ys          # ... from the values the panel showed


def _estimate_page():
    from app.headmap import latency
    from pruning_core.core.heads import HeadLayout, HeadMask

    mask = HeadMask.full(HeadLayout({"encoder_self": (4, 4)})).toggled("encoder_self", 0, 1)
    latency.latency_panel("tiny", mask, wait=False)


class _Calibrated:
    """A finished calibration job whose latency model is given."""

    def __init__(self, model) -> None:
        self.model = model

    def begin(self) -> None:
        pass

    def ready(self):
        return self.model


def test_while_a_mask_is_timed_the_panel_shows_the_estimate_marked_as_one(monkeypatch):
    from streamlit.testing.v1 import AppTest

    from app.headmap import latency
    from app.runtime.work import PENDING
    from pruning_core.bench.latency_model import LatencyModel

    model = LatencyModel(dense_s=0.100, saving_s={"encoder_self": 0.040}, heads={"encoder_self": 8}, batch_size=8,
                         seq_len=64, device="cpu", measured_at=1_000_000.0, load=1.5)
    monkeypatch.setattr(latency, "measurement", lambda *args, **kwargs: PENDING)    # this mask's timing still runs
    monkeypatch.setattr(latency, "_calibration", lambda spec: _Calibrated(model))
    at = AppTest.from_function(_estimate_page, default_timeout=60).run()
    assert not at.exception, at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown == {"latency (pruned), estimate": "≈ 95.0 ms", "pruned vs dense, estimate": "≈ 1.05x"}, shown
    caption = " ".join(c.value for c in at.caption)
    assert "**Estimate** until this mask's own timing replaces it" in caption and "dense 100.0 ms" in caption
    assert "load 1.50" in caption and "batch 8 x 64 tokens" in caption


def _early_page():
    from app.headmap import latency
    from pruning_core.core.heads import HeadLayout, HeadMask

    import streamlit as st

    mask = HeadMask.full(HeadLayout({"encoder_self": (4, 4)})).toggled("encoder_self", 0, 1)
    st.text(f"drawn {latency.early_latency('tiny', mask)}")


class _Untouched(_Calibrated):
    """A calibration job that must not be started while the metric is computed."""

    def begin(self) -> None:
        raise AssertionError("early_latency started work")


def test_while_the_metric_is_computed_the_estimate_is_drawn_without_starting_work(monkeypatch):
    from streamlit.testing.v1 import AppTest

    from app.headmap import latency
    from pruning_core.bench.latency_model import LatencyModel

    model = LatencyModel(dense_s=0.100, saving_s={"encoder_self": 0.040}, heads={"encoder_self": 8}, batch_size=8,
                         seq_len=64, device="cpu", measured_at=1_000_000.0, load=1.5)
    asked = []
    monkeypatch.setattr(latency, "measurement", lambda *a, **kw: asked.append(kw) or None)    # not timed yet
    monkeypatch.setattr(latency, "_calibration", lambda spec: _Untouched(model))
    at = AppTest.from_function(_early_page, default_timeout=60).run()
    assert not at.exception, at.exception
    assert asked == [{"measure": False}]                          # looked up, never timed
    assert {m.label: m.value for m in at.metric} == {"latency (pruned), estimate": "≈ 95.0 ms",
                                                     "pruned vs dense, estimate": "≈ 1.05x"}
    assert at.text[0].value == "drawn True"

    monkeypatch.setattr(latency, "_calibration", lambda spec: _Untouched(None))      # not calibrated: nothing
    at = AppTest.from_function(_early_page, default_timeout=60).run()
    assert not at.exception and not at.metric and at.text[0].value == "drawn False"


def test_an_estimate_says_when_and_how_its_timings_were_made():
    from app.headmap.latency import estimate_source
    from pruning_core.bench.latency_model import LatencyModel

    model = LatencyModel(dense_s=0.2, saving_s={"decoder_self": 0.1}, heads={"decoder_self": 30}, batch_size=1,
                         seq_len=64, device="cpu", measured_at=1_000_000.0)
    text = estimate_source(model, now=1_000_000.0 + 180)
    assert text == ("this model timed on this server at 13:46:40 UTC (3 min ago), dense and without each kind's heads "
                    "(batch 1 x 64 tokens)")


def test_in_a_class_each_metric_comes_before_any_loss_and_background_work_waits_for_the_losses():
    """An evaluation that has shown its metric lets the waiting clicks through before its loss
    (``yield_to_urgent(urgent=True)``): the clicks run in turn, each letting the next through, then the losses; a
    timing waiting all along gets the gate only after every loss, and no two holders ever run at once."""
    import threading

    from app.runtime.board import Gate

    gate, order, lock, inside = Gate(), [], threading.Lock(), [0]
    started = {name: threading.Event() for name in "ABC"}

    def step(what: str) -> None:
        with lock:
            inside[0] += 1
            order.append(what)
            assert inside[0] == 1, order              # one holder at a time
        with lock:
            inside[0] -= 1

    def click(name: str) -> None:
        with gate.hold(urgent=True):
            started[name].set()
            if name == "A":
                _wait_until(lambda: gate.waiting == 3)     # B, C and the timing queue while A computes its metric
            step(f"{name} metric")
            gate.yield_to_urgent(urgent=True)
            step(f"{name} loss")

    def timing() -> None:
        with gate.hold(urgent=False):
            step("timing")

    threads = [threading.Thread(target=click, args=("A",))]
    threads[0].start()
    _wait_until(started["A"].is_set)
    for waiting, (fn, args) in enumerate([(timing, ()), (click, ("B",)), (click, ("C",))], start=1):
        threads.append(threading.Thread(target=fn, args=args))
        threads[-1].start()
        _wait_until(lambda: gate.waiting == waiting)
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads), order
    assert order[0] == "A metric" and sorted(order[:3]) == ["A metric", "B metric", "C metric"], order
    assert sorted(order[3:6]) == ["A loss", "B loss", "C loss"] and order[6:] == ["timing"], order
    assert not gate._busy and gate.waiting == 0 and gate._returning == 0 and gate._urgent_waiting == 0
