"""benchmarks/dashboard_timings.py's own logic: the class's heads (each one-head mask once, or a cache
hit would time no work), the pooled medians, and the in-page timing of a click (a static page in
Chromium; skipped without it)."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dashboard_timings as bench  # noqa: E402
from browser_helpers import LIVE_STRIP, chromium_browser, chromium_path  # noqa: E402


def test_the_class_clicks_every_head_at_most_once_and_every_round_the_same_layers():
    picker = bench.HeadPicker([12] * 6, reserved={(0, 3)})
    rounds = [picker.round(1)] + [picker.round(8) for _ in range(3)] + [picker.round(1)] + \
             [picker.round(8) for _ in range(3)]
    clicked = [t for r in rounds for t in r]
    assert len(clicked) == 50 and len(set(clicked)) == 50 and picker.repeats == 0
    assert (0, 3) not in clicked
    eights = [[layer for layer, _ in r] for r in rounds if len(r) == 8]
    assert all(layers == eights[0] for layers in eights)
    assert sorted(set(eights[0])) == list(range(6))         # every depth: the work per click differs by layer
    assert [layer for layer, _ in rounds[0]] == [3]          # a lone session: a middle layer


def test_a_layer_that_runs_out_of_heads_is_counted_not_hidden():
    picker = bench.HeadPicker([2, 2])
    clicked = [t for _ in range(3) for t in picker.round(4)]
    assert picker.repeats == len(clicked) - 4
    assert all(0 <= head < 2 for _, head in clicked)


def _round(sessions, niceness, waits, correct=True, lost=0):
    return {"sessions": sessions, "browsers_niceness": niceness, "all_correct": correct, "clicks_lost": lost,
            "to_metric_s": bench._spread(waits), "server_memory_mib": {"peak_after": 100.0 + len(waits)},
            "per_session": [{"to_metric_s": w, "to_metric_sent_s": w - 0.1} for w in waits]}


def test_pooled_takes_the_median_over_every_session_of_every_round_per_niceness():
    rounds = [_round(8, 0, [1.0, 2.0, 3.0]), _round(8, 0, [4.0, 5.0, 6.0], correct=False, lost=2),
              _round(8, 19, [0.5, 0.7])]
    pooled = {p["browsers_niceness"]: p for p in bench.pooled(rounds)}
    assert pooled[0]["to_metric_s"]["median"] == 3.5 and pooled[0]["to_metric_s"]["n"] == 6
    assert pooled[0]["round_medians_s"] == [2.0, 5.0] and pooled[0]["all_correct"] is False
    assert pooled[19]["to_metric_s"]["median"] == 0.6 and pooled[19]["all_correct"] is True
    assert pooled[0]["clicks_lost"] == 2 and pooled[19]["clicks_lost"] == 0
    assert pooled[19]["to_metric_sent_s"]["median"] == pytest.approx(0.5)    # 0.6 - 0.1, float rounding only


@contextlib.contextmanager
def _static_page(content: str):
    """A Chromium page showing ``content``; the test is skipped without Chromium."""
    path = chromium_path()
    if path is None:
        pytest.skip("Chromium is not installed: run `make browser` (apt-get install chromium).")
    with chromium_browser(path) as browser:
        page = browser.new_page()
        page.set_content(content)
        yield page


# The page shows the new mask's latency estimate 300 ms after the mousedown (in the slot named by its heads kept,
# which replaces the old mask's), the new loss at 200 ms and metric at 400 ms, the measured latency at 1,000 ms.
# The script sits in the head, as Streamlit's do: the watch reads the body's text.
PAGE = f"""<html><head><script>
document.addEventListener('DOMContentLoaded', () => document.getElementById('b').addEventListener('mousedown', () => {{
  const s = document.querySelector('{LIVE_STRIP}'), lat = document.getElementById('lat');
  s.textContent = 'Heads kept 71 / 72 · metric and loss: updating…';
  lat.className = '{bench.LATENCY_SLOT[1:]}71'; lat.textContent = 'latency: updating…';
  setTimeout(() => {{ s.textContent = 'Heads kept 71 / 72 · BLEU: updating (decoding)… · loss 0.31'; }}, 200);
  setTimeout(() => {{ lat.textContent = 'latency (pruned), estimate ≈ 2 ms measuring this mask…'; }}, 300);
  setTimeout(() => {{ s.textContent = 'Heads kept 71 / 72 · BLEU 28 · loss 0.31'; }}, 400);
  setTimeout(() => {{ lat.textContent = 'latency (pruned) 2 ms'; }}, 1000);
}}));
</script></head><body><button id="b" style="width:200px;height:50px">head</button>
<div class="{LIVE_STRIP[1:]}">Heads kept 72 / 72 · BLEU 29 · loss 0.3</div>
<div id="lat" class="{bench.LATENCY_SLOT[1:]}72">latency (pruned) 1 ms</div>
</body></html>"""


def test_a_click_is_timed_inside_the_page_until_the_new_loss_metric_and_latency_show():
    """A translation's loss shows before its BLEU (the strip still says "updating"); the new mask's latency
    estimate may show before either, its measurement later: each is timed when it shows, the old mask's latency
    never counts."""
    with _static_page(PAGE) as page:
        bench.watch(page, 71)
        assert bench.watched(page) == {"loss": None, "metric": None, "latency": None, "measured": None}  # no click yet
        page.click("#b")
        page.wait_for_function("() => window.__hp_click.measured !== null", timeout=10_000)
        times = bench.watched(page)
        # setTimeout fires no earlier than asked; a loaded machine may add tens of milliseconds
        assert 0.2 <= times["loss"] < 0.2 + 1.0 and times["metric"] > times["loss"]
        assert 0.4 <= times["metric"] < 0.4 + 1.0
        assert 0.3 <= times["latency"] < 0.3 + 1.0 and times["latency"] < times["metric"]     # the estimate
        assert 1.0 <= times["measured"] < 1.0 + 1.0 and times["measured"] > times["latency"]  # the measurement


def test_the_panel_logs_each_metric_sent_and_the_observer_writes_it_as_a_json_line(tmp_path, caplog):
    """The app writes no file: it logs a record; the benchmark's sitecustomize turns the records into lines."""
    import json
    import logging
    import os
    import subprocess

    from app.headmap import panel
    from pruning_core.core.heads import HeadLayout, HeadMask

    mask = HeadMask.full(HeadLayout({"encoder_self": (2, 2)})).toggled("encoder_self", 1, 0)
    with caplog.at_level(logging.INFO, logger=panel.METRICS_LOG.name):
        panel._note_metric_sent(mask)
    (record,) = caplog.records
    logged = json.loads(record.getMessage().removeprefix("metric sent "))
    assert logged["kept"] == 3 and {"mask", "sent", "cpu"} <= set(logged)

    out = tmp_path / "sent.jsonl"
    root = Path(bench.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "benchmarks" / "observer"), str(root)]),
           "HEADPRUNE_BENCH_METRICS_LOG": str(out)}
    subprocess.run([sys.executable, "-c", "import logging; logging.getLogger('headprune.app.metrics')"
                    ".info('metric sent %s', '{\"mask\": \"e:1.f\", \"sent\": 1.5, \"cpu\": 2.5}')"], env=env, check=True)
    assert bench.metrics_sent(out) == {"e:1.f": 1.5} and bench.metrics_sent(out, "cpu") == {"e:1.f": 2.5}


def test_spread_clicks_take_every_kind_in_turn_and_spread_over_its_layers():
    grids = [[8] * 6, [8] * 2, [8] * 2]            # a translation student: 6 encoder layers, 2 decoder layers
    targets = bench.kind_targets(grids, 9, 3)
    assert [t[0] for t in targets] == [0, 1, 2] * 3
    assert sorted({t[1] for t in targets if t[0] == 0}) == [1, 3, 5]       # spread, not the last three
    assert {t[1] for t in targets if t[0] == 1} == {0, 1}
    assert len(set(targets)) == 9 and all(0 <= h < 8 for _, _, h in targets)   # never the same head twice
    assert [t[1] for t in bench.kind_targets([[9] * 30], 6, 3)] == [29, 24, 19, 14, 9, 4]


LOST = f"""<html><body><button id="b" style="width:200px;height:50px">head</button>
<div class="{LIVE_STRIP[1:]}">Heads kept 72 / 72 · BLEU 29 · loss 0.3</div></body></html>"""


def test_a_lost_click_is_told_from_one_the_page_reacted_to():
    with _static_page(LOST) as page:
        bench.watch(page, 71)
        assert bench.clicks_lost_after(page, 72, 0.5)               # nothing changed: lost
        page.evaluate(f"() => document.querySelector('{LIVE_STRIP}').textContent = "
                      "'Heads kept 71 / 72 · metric and loss: updating…'")
        assert not bench.clicks_lost_after(page, 72, 0.5)           # the server heard it
