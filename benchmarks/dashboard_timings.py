"""Dashboard timings on the embedded default (MiniLM-L6) in Debian's Chromium: the Head map's live loop.

    .venv/bin/python benchmarks/dashboard_timings.py            # writes benchmarks/results/dashboard_timings.json
    .venv/bin/python benchmarks/dashboard_timings.py --model /path/to/folder --task sst2 --out other.json

What it measures and writes, in full: benchmarks/README.md, ``dashboard_timings.py``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_helpers import (_RECORD_INPUT, LIVE_STRIP, POLL_MS, DashboardServer, chromium_browser,  # noqa: E402
                             chromium_path, click_point, head_points, page_state, process_cpu_s, square_center,
                             wait_idle, wait_live)

from pruning_core.core.io.share_link import decode_mask  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def cpu_description() -> dict:
    """The CPU's name and whether it has the bf16 / AMX units (the machines of this kind differ in them)."""
    flags, name = set(), ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and not name:
            name = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    return {"name": name, "cores": os.cpu_count(), **{f: f in flags for f in ("avx512f", "avx512_bf16", "amx_bf16")}}
FIRST = 3               # the toggles start at the 4th kept head (first layer) or, with --spread, head 3 of the last


LATENCY_SLOT = ".st-key-hp-latency-"    # + heads kept: app.headmap.panel.latency_key, the new mask's latency slot
LATENCY = "latency (pruned)"            # its figure, estimated ("latency (pruned), estimate") or measured
ESTIMATE = "estimate"
# Timed inside the page: performance.now() at the click's mousedown and at the first change of the page
# after which it shows the new loss, the new metric (the strip with the new count, no "updating"), the new
# mask's latency (its estimate or its measurement, in the slot named by its heads kept), then its measurement
# (no estimate left there). The benchmark's own waiting then adds nothing: neither its polling interval
# nor the frames a page draws while Playwright polls it on every animation frame.
WATCH = """([sel, kept, slot, latency, estimate]) => {
  const w = window.__hp_click = {click: null, loss: null, metric: null, latency: null, measured: null};
  document.addEventListener('mousedown', () => { if (w.click === null) w.click = performance.now(); }, {capture: true});
  const check = () => {
    if (w.click === null) return;
    const s = document.querySelector(sel);
    if (w.loss === null && s && s.textContent.includes(kept) && /loss \\d/.test(s.textContent))
      w.loss = performance.now();
    if (w.metric === null && s && s.textContent.includes(kept) && !s.textContent.includes('updating'))
      w.metric = performance.now();
    const l = document.querySelector(slot);
    const shown = l !== null && l.textContent.includes(latency);
    if (w.latency === null && shown)
      w.latency = performance.now();
    if (w.latency !== null && w.measured === null && shown && !l.textContent.includes(estimate))
      w.measured = performance.now();
    if (w.measured !== null && w.metric !== null) observer.disconnect();
  };
  const observer = new MutationObserver(check);
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _spread(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 3), "min": round(ordered[0], 3), "max": round(ordered[-1], 3),
            "n": len(ordered)}


def _kept(page) -> int:
    text = page.locator(LIVE_STRIP).text_content()
    return int(text.split("Heads kept", 1)[1].split("/")[0])


def watch(page, kept_after: int) -> None:
    """Time the page's next click inside the page (:data:`WATCH`) until it shows ``kept_after`` heads kept."""
    page.evaluate(WATCH, [LIVE_STRIP, f"{kept_after} / ", f"{LATENCY_SLOT}{kept_after}", LATENCY, ESTIMATE])


def wait_watched(page, what: str, timeout_s: float = 900, polling_ms: int = POLL_MS) -> None:
    """Wait until the watched click's ``what`` ("loss", "metric", "latency" or "measured") has been drawn."""
    page.wait_for_function("what => window.__hp_click[what] !== null", arg=what, timeout=timeout_s * 1000,
                           polling=polling_ms)


def watched(page) -> dict[str, float | None]:
    """Seconds from the watched click to the loss drawn (after the metric when a translation decodes), to the
    metric drawn and to the latency drawn (None: not seen)."""
    w = page.evaluate("() => window.__hp_click")
    return {k: None if w is None or w["click"] is None or w[k] is None else round((w[k] - w["click"]) / 1000, 3)
            for k in ("loss", "metric", "latency", "measured")}


def settle(pid: int, idle_cpu_s: float = 0.05, window_s: float = 1.0, limit_s: float = 120.0,
           wait=time.sleep) -> float:
    """Wait until the server has been idle (under ``idle_cpu_s`` CPU seconds in ``window_s``), so a click is
    timed with its own work only, not behind what the page load started (scores, roles, a first latency
    timing); returns the seconds waited (``limit_s`` at most). ``wait(seconds)``: how to pass the time (a
    Playwright page's wait delivers the frames that arrive meanwhile)."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        cpu = process_cpu_s(pid)
        wait(window_s)
        if process_cpu_s(pid) - cpu < idle_cpu_s:
            break
    return round(time.perf_counter() - started, 2)


def _server_memory(pid: int) -> dict:
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
    return {k: round(int(fields[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM")}      # MiB


def _reset_peak(pid: int) -> bool:
    """Start the server's peak resident memory (VmHWM) afresh, so a scenario's peak is its own, not the
    earlier runs' (Linux 4.0 and later: "5" to /proc/PID/clear_refs); False where it cannot."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class Reference:
    """The model and examples the server evaluates, loaded here: one forward pass (wall and CPU seconds) and
    the library's metric and loss of a session's mask, formatted as the panel shows them."""

    def __init__(self, model: str, task: str, limit: int) -> None:
        from pruning_core import tasks
        from pruning_core.modeling.sources.loading import load_model

        self.loaded = load_model(model, device="cpu")
        self.task = tasks.get_task(task)
        self.data = self.task.encode(self.loaded, getattr(self.task, "default_split", "validation"), limit)

    def forward_pass(self, repeats: int = 5) -> dict:
        from pruning_core.core.heads import HeadMask

        walls, cpus = [], []
        self.task.evaluate(self.loaded, self.data, None, batch_size=64)      # warm-up, untimed
        for i in range(repeats):
            layout = self.loaded.layout
            kind = next(iter(layout.kinds))                  # the first kind: encoder_self, decoder_self, ...
            mask = HeadMask.full(layout).toggled(kind, i % 2, (5 + i) % layout.kinds[kind][0])
            wall, cpu = time.perf_counter(), time.process_time()
            self.task.evaluate(self.loaded, self.data, mask, batch_size=64)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        return {"wall_s": _spread(walls), "cpu_s": _spread(cpus), "load_average_1min": _load(),
                "what": f"task.evaluate of {len(self.data.texts)} examples under a one-head mask, batch 64, "
                        "in the benchmark's process (CPU: all its threads)"}

    def one_removed(self, layer: int, head: int) -> str:
        """The link text of every head kept but (``layer``, ``head``) of the first grid."""
        from pruning_core.core.heads import HeadMask
        from pruning_core.core.io.share_link import encode_mask

        layout = self.loaded.layout
        return encode_mask(HeadMask.full(layout).toggled(next(iter(layout.kinds)), layer, head))

    def shown(self, url: str) -> tuple[str, str]:
        """(metric, loss) of the mask in ``url`` as the panel formats them."""
        from app.core import uncertainty
        from pruning_core.core.io.share_link import decode_mask

        qp = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))
        ev = self.task.evaluate(self.loaded, self.data, decode_mask(qp["mask"], self.loaded.layout), batch_size=64)
        return uncertainty.unitless(ev.metric_name, uncertainty.shown(ev).value), f"{ev.loss:.4f}"


def open_head_map(browser, url: str, width: int = 1366, height: int = 900, before=None):
    """A new page on the Head map, once its live panel is drawn; ``before(page)`` runs before it loads."""
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_init_script(_RECORD_INPUT)           # its last presses and clicks, for a lost click's report
    page = context.new_page()
    page.set_default_timeout(600_000)
    if before is not None:
        before(page)
    page.goto(f"{url}/head_map")
    wait_idle(page, 900_000)
    page.wait_for_function("sel => { const s = document.querySelector(sel); return !!s &&"
                           " !s.textContent.includes('updating'); }", arg=LIVE_STRIP, timeout=900_000)
    return page


def spread_targets(rows: list[int], toggles: int, offset: int) -> list[tuple[int, int]]:
    """``toggles`` (layer, head) pairs of a grid with ``rows[layer]`` heads per layer: the last layer first,
    then each layer above it in turn (a click on layer L lets a cached evaluation rerun layers L and later
    only: these clicks cover every depth, where the first heads of the grid all lie in layer 0)."""
    out: list[tuple[int, int]] = []
    for i in range(toggles):
        layer = len(rows) - 1 - i % len(rows)
        out.append((layer, (offset + i // len(rows)) % rows[layer]))
    return out


def kind_targets(grids: list[list[int]], toggles: int, offset: int) -> list[tuple[int, int, int]]:
    """``toggles`` (grid, layer, head) triples taking the attention kinds in turn (``grids[k]``: heads per layer of
    the k-th grid); each kind's clicks spread evenly over its layers, the last layer first (head ``offset``, then the
    next head when a kind has more clicks than layers)."""
    out = []
    for i in range(toggles):
        kind, j = i % len(grids), i // len(grids)
        rows, clicks_here = grids[kind], len(range(kind, toggles, len(grids)))
        layer = len(rows) - 1 - (j * len(rows)) // clicks_here if clicks_here <= len(rows) else len(rows) - 1 - j % len(rows)
        out.append((kind, layer, (offset + j // len(rows)) % rows[layer]))
    return out


class HeadPicker:
    """The heads the class sessions click, each (layer, head) once in the whole run. A fresh session's click
    makes a one-head mask, and a mask any session evaluated before is a cache hit that times no work. Every
    round clicks the same layers (:meth:`layers`: all depths, as the work of a click depends on its layer:
    :mod:`pruning_core.modeling.inference.layer_cache`), heads from the last of each layer down; ``repeats`` counts the heads
    clicked again once a layer has run out."""

    def __init__(self, rows: list[int], reserved: set[tuple[int, int]] = frozenset()) -> None:
        self.rows, self.used, self.repeats = rows, set(reserved), 0

    def layers(self, sessions: int) -> list[int]:
        """The layers of a round of ``sessions`` clicks: spread over the depths, last layer first (a lone
        session: a middle layer, whose heads a round of eight uses least)."""
        n = len(self.rows)
        return [n // 2] if sessions == 1 else [n - 1 - (i * n) // sessions for i in range(sessions)]

    def take(self, layer: int) -> tuple[int, int]:
        for head in reversed(range(self.rows[layer])):
            if (layer, head) not in self.used:
                self.used.add((layer, head))
                return layer, head
        self.repeats += 1
        return layer, self.repeats % self.rows[layer]

    def round(self, sessions: int) -> list[tuple[int, int]]:
        return [self.take(layer) for layer in self.layers(sessions)]


def point_index(rows: list[int], removed: set[tuple[int, int]], layer: int, head: int) -> int:
    """The position of kept head (layer, head) among the map's kept markers (layer by layer, head by head)."""
    return sum(1 for l, n in enumerate(rows) for h in range(n) if (l, h) < (layer, head) and (l, h) not in removed)


@dataclass
class Square:
    """A head's square, clicked where the figure's own axes put it (:func:`square_center`) once its marker is in
    view: a marker's position in the kept trace is only a guess at which square it is."""

    page: object
    chart: int
    layer: int
    head: int
    marker: object

    def bounding_box(self) -> dict:
        x, y = square_center(self.page, self.layer, self.head, self.chart)
        return {"x": x, "y": y, "width": 0.0, "height": 0.0}

    def evaluate(self, script: str):
        return self.marker.evaluate(script)


def clicks_lost_after(page, kept: int, seconds: float) -> bool:
    """Whether a click made just now was lost: for ``seconds`` the page still shows ``kept`` heads and nothing
    updating (a click on a map Plotly is redrawing can fall between two drawings; the server never hears of it).
    Checked every :data:`POLL_MS` in the page, returning as soon as the page reacted."""
    try:
        page.wait_for_function(
            "([sel, old]) => { const s = document.querySelector(sel), t = s ? s.textContent : '';"
            " return !t.includes(old) || t.includes('updating') || window.__hp_click.metric !== null; }",
            arg=[LIVE_STRIP, f"Heads kept {kept} /"], timeout=seconds * 1000, polling=POLL_MS)
        return False
    except Exception:                       # Playwright's TimeoutError: the page never reacted
        return True


def clicked_lost(page, kept: int) -> bool:
    """A click is taken as lost when for 10 s the page shows the old count and no "updating" (every model marks
    its figures "updating" as soon as a click reaches the server)."""
    return clicks_lost_after(page, kept, 10.0)


def clicks(page, pid: int, toggles: int, first: int, grids: list[list[int]] | None = None,
           timing_log: Path | None = None) -> list[dict]:
    """``toggles`` head clicks on one page, each timed until the new metric and until the new latency: the
    kept heads from the ``first``-th on (in the first layers of the first grid), or with ``grids`` (heads per layer
    of each attention kind's grid) the kinds in turn, one head per layer from the last layer up (:func:`kind_targets`)."""
    out = []
    targets = kind_targets(grids, toggles, first) if grids else None
    removed: list[set[tuple[int, int]]] = [set() for _ in grids or [[]]]
    for i in range(toggles):
        waited = settle(pid)
        kept = _kept(page)
        if targets is None:
            point = head_points(page).nth(first + i)                 # a kept head: one fewer each time
        else:
            chart, layer, head = targets[i]
            point = Square(page, chart, layer, head,
                           _in_view(head_points(page, chart).nth(point_index(grids[chart], removed[chart], layer, head))))
        retried = 0
        while True:
            watch(page, kept - 1)
            cpu0, clicked, browsers0 = process_cpu_s(pid), time.time(), browsers_cpu_s()
            click_point(page, point)
            if clicked_lost(page, kept) and retried < 3:
                retried += 1                # the map was being redrawn: the click never reached the server
                settle(pid)
                point = _in_view(point)
                continue
            break
        if targets is not None:
            removed[targets[i][0]].add(targets[i][1:])
        wait_watched(page, "metric", 600)
        cpu1, browsers1 = process_cpu_s(pid), browsers_cpu_s()
        mask = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(page.url).query)).get("mask")
        first = (metrics_sent(timing_log, None, after=clicked).get(mask) if timing_log else None) or {}
        sent, sent_at = first.get("cpu"), first.get("sent")
        wait_watched(page, "measured", 600)
        times = watched(page)
        wait_idle(page, 600_000)
        out.append({"kind": targets[i][0] if targets else 0, "clicks_lost_and_repeated": retried, "layer": targets[i][1] if targets else None,
                    "mask": mask,                    # the page's link form (share_link): benchmarks/click_work.py replays it
                    "to_loss_s": times["loss"], "to_metric_s": times["metric"],
                    "server_cpu_to_metric_s": round(cpu1 - cpu0, 3),
                    "browser_cpu_to_metric_s": round(browsers1 - browsers0, 3),   # the page's drawing, same cores
                    "server_cpu_to_metric_sent_s": round(sent - cpu0, 3) if sent is not None else None,
                    "to_metric_sent_s": round(sent_at - clicked, 3) if sent_at is not None else None,
                    "to_latency_s": times["latency"], "to_latency_measured_s": times["measured"],
                    "server_cpu_to_latency_s": round(process_cpu_s(pid) - cpu0, 3), "load_average_1min": _load(),
                    "settled_after_s": waited})
    return out


def class_scenario(browser, srv, ref: Reference, targets: list[tuple[int, int]], rows: list[int], timing_log: Path,
                   niceness: int = 0) -> dict:
    """One fresh session per (layer, head) of ``targets`` (``rows``: heads per layer of the first grid), all
    clicking their head at about the same moment; every metric checked.
    ``niceness``: the Chromiums' scheduling niceness while they click (0: the server's; 19: they take only
    what the server leaves, as browsers on the students' own machines would take none of it)."""
    sessions = len(targets)
    pages = [open_head_map(browser, srv.url) for _ in range(sessions)]
    set_browsers_niceness(niceness)
    waited = settle(srv.proc.pid)                     # every page loaded and the server idle: then all click
    own_peak = _reset_peak(srv.proc.pid)
    memory_before, load_before = _server_memory(srv.proc.pid), _load()
    kept = [_kept(p) for p in pages]
    boxes = [_in_view(head_points(page).nth(point_index(rows, set(), *target))).bounding_box()
             for page, target in zip(pages, targets)]
    for page, k in zip(pages, kept):
        watch(page, k - 1)
    cpu0 = process_cpu_s(srv.proc.pid), browsers_cpu_s()
    clicked_at = {}
    for i, (page, box) in enumerate(zip(pages, boxes)):       # Playwright is sequential: clicks a few ms apart
        clicked_at[i] = time.time()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for page in pages:                      # each page timed its own click; waiting here only ends the scenario
        wait_watched(page, "metric", polling_ms=4 * POLL_MS)
    for page in pages:                      # a translation's loss follows its BLEU: both are checked
        wait_watched(page, "loss", polling_ms=4 * POLL_MS)
    cpu = {"server": round(process_cpu_s(srv.proc.pid) - cpu0[0], 2), "browsers": round(browsers_cpu_s() - cpu0[1], 2)}
    waits = {i: watched(page)["metric"] for i, page in enumerate(pages)}
    load_after, memory_after = _load(), _server_memory(srv.proc.pid)
    checks, sent = [], metrics_sent(timing_log, after=min(clicked_at.values()))
    for i, page in enumerate(pages):
        text = page.locator(LIVE_STRIP).text_content()
        url = page.evaluate("location.href")
        metric, loss = ref.shown(url)
        mask = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query)).get("mask")
        server = round(sent[mask] - clicked_at[i], 3) if mask in sent else None
        checks.append({"session": i, "to_metric_s": waits[i],
                       "to_metric_sent_s": server, "shown": text,
                       "library_metric": metric, "library_loss": loss,
                       "correct": f" {metric} · loss {loss}" in " ".join(text.split()),
                       "click_kept": mask == ref.one_removed(*targets[i])})   # the link: exactly its click
        page.context.close()
    done = [c["to_metric_s"] for c in checks if c["to_metric_s"] is not None]
    server = [c["to_metric_sent_s"] for c in checks if c["to_metric_sent_s"] is not None]
    return {"sessions": sessions, "browsers_niceness": niceness, "clicked": [list(t) for t in targets],
            "to_metric_s": _spread(done) if done else None,
            "to_metric_sent_s": _spread(server) if server else None, "all_correct": all(
        c["correct"] for c in checks) and len(done) == sessions,
            "clicks_lost": sum(not c["click_kept"] for c in checks), "per_session": checks,
        "cpu_s_to_last_metric": cpu, "server_memory_mib": {"rss_before": memory_before["VmRSS"], "peak_after": memory_after["VmHWM"],
                              "peak_is_this_scenarios": own_peak},
        "load_average_1min": {"before": load_before, "after": load_after}, "settled_after_s": waited}


def _in_view(point):
    """``point`` scrolled to the middle of the window (a tall map, SmolLM2's 30 layers, does not fit 900 px; a marker
    scrolled only just into view can sit under Streamlit's header, which then takes the click)."""
    point.evaluate("e => e.scrollIntoView({block: 'center', inline: 'nearest'})")
    return point


def random_moments(browser, srv, ref: Reference, sessions: int, per_session: int, span_s: float, rows: list[int],
                   seed: int, picker: HeadPicker) -> dict:
    """``sessions`` fresh sessions clicking ``per_session`` heads each at random moments over ``span_s`` seconds,
    never waiting for the page (a click may land while a metric or a latency is still being worked out); then
    each page's link is compared with the heads it clicked (clicks lost: must be 0) and its metric with the
    library's evaluation of that link."""
    import random

    rng = random.Random(seed)
    pages = [open_head_map(browser, srv.url) for _ in range(sessions)]
    settle(srv.proc.pid)
    heads = [[picker.take(layer) for layer in rng.sample(range(len(rows)), per_session)] for _ in pages]
    events = sorted((rng.uniform(0, span_s), i, target) for i, targets in enumerate(heads) for target in targets)
    load_before, started = _load(), time.perf_counter()
    late, where = [], {i: [] for i in range(len(pages))}
    for at, i, (layer, head) in events:
        time.sleep(max(0.0, at - (time.perf_counter() - started)))
        late.append(time.perf_counter() - started - at)             # behind schedule (earlier clicks took time)
        x, y = square_center(pages[i], layer, head)
        pages[i].mouse.click(x, y)
        where[i].append({"head": [layer, head], "at_s": round(time.perf_counter() - started, 3),
                         "point": [round(x, 1), round(y, 1)], "then": [round(v, 1) for v in square_center(
                             pages[i], layer, head)]})
    clicked_s = time.perf_counter() - started
    checks = []
    total = ref.loaded.layout.total_heads
    for i, page in enumerate(pages):
        waited = time.perf_counter()
        try:
            wait_live(page, f"{total - per_session} / {total}", timeout_s=300)
        except Exception:                           # a lost click leaves the count short for good: counted below
            pass
        url = page.evaluate("location.href")
        mask = decode_mask(dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))["mask"], ref.loaded.layout)
        kind = next(iter(ref.loaded.layout.kinds))
        removed = {(l, h) for l, row in enumerate(mask.kinds[kind]) for h, keep in enumerate(row) if not keep}
        wanted = set(map(tuple, heads[i]))
        metric, loss = ref.shown(url)
        text = page.locator(LIVE_STRIP).text_content()
        lost = len(wanted - removed)
        checks.append({"session": i, "clicked": sorted(wanted), "lost": lost, "clicks": where[i],
                       "page": page_state(page) if lost or removed - wanted else None,
                       "unexpected": len(removed - wanted), "settled_after_last_click_s": round(
                           time.perf_counter() - waited, 2), "shown": text, "library_metric": metric,
                       "library_loss": loss, "correct": f" {metric} · loss {loss}" in " ".join(text.split())})
        page.context.close()
    return {"sessions": sessions, "clicks_per_session": per_session, "span_s": span_s, "seed": seed,
            "clicks": len(events), "clicks_lost": sum(c["lost"] for c in checks),
            "heads_wrongly_removed": sum(c["unexpected"] for c in checks),
            "all_correct": all(c["correct"] for c in checks), "clicking_took_s": round(clicked_s, 2),
            "click_lateness_s": _spread(late), "per_session": checks,
            "load_average_1min": {"before": load_before, "after": _load()}}


def _browsers():
    import psutil

    for proc in psutil.Process().children(recursive=True):
        try:
            if "chrom" in proc.name():
                yield proc
        except psutil.NoSuchProcess:
            pass


def set_browsers_niceness(niceness: int) -> None:
    """Give every thread of every Chromium process this benchmark started the scheduling ``niceness`` (Linux:
    0 to 19, per thread: a process's niceness is its main thread's, and its compositor and raster threads
    keep theirs; threads started later inherit it. Only root may lower it again, so the class runs at 0
    come before those at 19)."""
    import psutil

    for proc in _browsers():
        try:
            for thread in proc.threads():
                if os.getpriority(os.PRIO_PROCESS, thread.id) != niceness:
                    os.setpriority(os.PRIO_PROCESS, thread.id, niceness)
        except (psutil.NoSuchProcess, ProcessLookupError):
            pass


def pooled(classes: list[dict]) -> list[dict]:
    """Per class size and browser niceness: the median over every session of every round (each round's own
    median is in its entry), the slowest session, whether every metric was correct, and the rounds' medians."""
    groups: dict[tuple[int, int], list[dict]] = {}
    for c in classes:
        groups.setdefault((c["sessions"], c["browsers_niceness"]), []).append(c)
    out = []
    for (sessions, niceness), rounds in sorted(groups.items()):
        waits = [s["to_metric_s"] for c in rounds for s in c["per_session"] if s["to_metric_s"] is not None]
        sent = [s["to_metric_sent_s"] for c in rounds for s in c["per_session"] if s["to_metric_sent_s"] is not None]
        out.append({"sessions": sessions, "browsers_niceness": niceness, "rounds": len(rounds),
                    "to_metric_s": _spread(waits) if waits else None, "to_metric_sent_s": _spread(sent) if sent else None,
                    "round_medians_s": [c["to_metric_s"]["median"] if c["to_metric_s"] else None for c in rounds],
                    "all_correct": all(c["all_correct"] for c in rounds),
                    "clicks_lost": sum(c["clicks_lost"] for c in rounds),
                    "server_peak_mib": max(c["server_memory_mib"]["peak_after"] for c in rounds)})
    return out


def class_over_single(pooled_rows: list[dict]) -> list[dict]:
    """Per browser niceness: the class's median click -> metric over one session's, from the same run."""
    by = {(r["sessions"], r["browsers_niceness"]): r for r in pooled_rows}
    out = []
    for (sessions, niceness), row in sorted(by.items()):
        single = by.get((1, niceness))
        if sessions > 1 and single and single["to_metric_s"] and row["to_metric_s"]:
            out.append({"sessions": sessions, "browsers_niceness": niceness,
                        "ratio": round(row["to_metric_s"]["median"] / single["to_metric_s"]["median"], 2),
                        "class_median_s": row["to_metric_s"]["median"], "single_s": single["to_metric_s"]["median"]})
    return out


def browsers_cpu_s() -> float:
    """CPU seconds (user + system) used so far by the Chromium processes this benchmark started."""
    import psutil

    total = 0.0
    for proc in _browsers():
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            pass
    return total


def metrics_sent(log: Path, field: str | None = "sent", after: float = 0.0) -> dict:
    """When the server first sent each mask's metric at or after epoch ``after`` (``sent``: epoch seconds;
    ``cpu``: the server's CPU seconds by then; None: the whole record), from the records of
    ``app.headmap.panel.METRICS_LOG`` that ``benchmarks/observer/sitecustomize.py`` writes to ``log`` (each redraw
    of the panel sends the metric again: the first send is the one a click waited for)."""
    import json

    if not log.is_file():
        return {}
    first: dict = {}
    for row in map(json.loads, log.read_text().splitlines()):
        if row["sent"] >= after:
            first.setdefault(row["mask"], row if field is None else row[field])
    return first


def busy_loops(n: int) -> list[subprocess.Popen]:
    """``n`` processes that spin on a CPU each (the "loaded" condition); the caller stops them."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="'default' (prepared) or a local model folder")
    parser.add_argument("--task", default="movie-sentiment")
    parser.add_argument("--limit", type=int, default=128, help="examples evaluated (the dashboard's default)")
    parser.add_argument("--toggles", type=int, default=5, help="clicks per run (0: the class scenario only)")
    parser.add_argument("--busy", type=int, default=2, help="busy loops of the loaded run (0: quiet run only)")
    parser.add_argument("--class-size", type=int, default=8, help="sessions of the class scenario (0: skip it)")
    parser.add_argument("--class-rounds", type=int, default=3,
                        help="rounds of the class scenario per niceness, each with other heads (their layers, "
                             "and so the work a click takes, differ)")
    parser.add_argument("--single-rounds", type=int, default=5,
                        help="clicks of the lone session, one per round (the class's ratio divides by their median)")
    parser.add_argument("--browser-niceness", type=lambda v: [int(x) for x in v.split(",")], default=[0, 19],
                        help="the Chromiums' niceness in the class scenario, comma-separated (default 0,19: as "
                             "the server, then yielding to it as browsers on other machines would)")
    parser.add_argument("--spread", action="store_true",
                        help="click one head per layer from the last layer up (default: the first heads, all in "
                             "layer 0, which a cached evaluation must rerun from the first layer)")
    parser.add_argument("--random-clicks", type=int, default=3,
                        help="heads each class session clicks at random moments, never waiting for the page (0: skip)")
    parser.add_argument("--random-span", type=float, default=6.0, help="seconds over which those clicks fall")
    parser.add_argument("--out", default=str(RESULTS / "dashboard_timings.json"))
    args = parser.parse_args(argv)
    from pruning_core.core.io import storage
    from pruning_core.bench import BENCH_FORMAT
    from pruning_core.modeling.sources.loading import default_model_dir
    from pruning_core.evaluation.results import provenance

    if args.model == "default" and not (default_model_dir() / "config.json").is_file():
        print("The embedded default is not prepared: run `headprune prepare` first.", file=sys.stderr)
        return 2
    path = chromium_path()
    if path is None:
        print("Chromium is not installed: run `make browser` (apt-get install chromium).", file=sys.stderr)
        return 2
    log = ROOT / "test-artifacts" / "dashboard_timings-streamlit.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    ref = Reference(args.model, args.task, args.limit)
    timing_log = log.with_name("dashboard_timings-sent.jsonl")        # when the server sent each metric
    timing_log.unlink(missing_ok=True)
    env = {"PYTHONPATH": str(ROOT / "benchmarks" / "observer"), "HEADPRUNE_BENCH_METRICS_LOG": str(timing_log), "HEADPRUNE_APP_MODEL": args.model, "HEADPRUNE_APP_TASK": args.task, "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu", "HEADPRUNE_APP_EVAL_LIMIT": str(args.limit)}
    runs, classes, random_class = [], [], None
    grids = [list(rows) for rows in ref.loaded.layout.kinds.values()]      # heads per layer of each kind's grid
    rows = grids[0]
    with DashboardServer(env, log) as srv, chromium_browser(path) as browser:
        page = open_head_map(browser, srv.url)                    # cold: loads, scores, evaluates, times
        for n, busy in enumerate(([0, args.busy] if args.busy else [0]) if args.toggles else []):
            loops = busy_loops(busy)
            try:
                before = _load()
                forward = ref.forward_pass()
                toggles = clicks(page, srv.proc.pid, args.toggles, first=FIRST + 8 * n, grids=grids if args.spread else None,
                                 timing_log=timing_log)
            finally:
                for proc in loops:                    # only the processes started here
                    proc.kill()
                    proc.wait()
            run = {"condition": (f"loaded: {busy} extra busy loops (python -c 'while True: pass')" if busy
                                 else "as found (no extra load from this script)"),
                   "load_average_1min_before": before, "one_forward_pass": forward, "toggles": toggles,
                   "click_to_metric_s": _spread([c["to_metric_s"] for c in toggles]),
                   "click_to_loss_s": _spread(losses) if (losses := [c["to_loss_s"] for c in toggles
                                                                     if c["to_loss_s"] is not None]) else None,
                   "click_to_latency_s": _spread([c["to_latency_s"] for c in toggles]),
                   "click_to_latency_measured_s": _spread([c["to_latency_measured_s"] for c in toggles]),
                   "server_cpu_to_metric_s": _spread([c["server_cpu_to_metric_s"] for c in toggles])}
            if args.spread:
                run["by_kind"] = {name: {"click_to_loss_s": _spread(l) if (l := [c["to_loss_s"] for c in toggles
                                                                               if c["kind"] == k and c["to_loss_s"] is not None]) else None,
                                         "click_to_metric_s": _spread([c["to_metric_s"] for c in toggles if c["kind"] == k])}
                                  for k, name in enumerate(ref.loaded.layout.kinds) if any(c["kind"] == k for c in toggles)}
            sent = [c["server_cpu_to_metric_sent_s"] for c in toggles if c["server_cpu_to_metric_sent_s"] is not None]
            run["server_cpu_to_metric_sent_s"] = _spread(sent) if sent else None
            run["cpu_to_metric_over_one_forward_pass"] = round(
                run["server_cpu_to_metric_s"]["median"] / forward["cpu_s"]["median"], 2)
            run["cpu_to_metric_sent_over_one_forward_pass"] = round(
                run["server_cpu_to_metric_sent_s"]["median"] / forward["cpu_s"]["median"], 2) if sent else None
            runs.append(run)
            print(f"{run['condition']}: click -> loss {run['click_to_loss_s']}, click -> metric "
                  f"{run['click_to_metric_s']}, click -> latency "
                  f"{run['click_to_latency_s']}, server CPU to metric {run['server_cpu_to_metric_s']} (to the metric sent: "
                  f"{run['server_cpu_to_metric_sent_s']}) vs one "
                  f"forward pass {forward['cpu_s']} CPU s ({forward['wall_s']} wall s); load {before} -> {_load()}",
                  flush=True)
        page.context.close()
        first_click = kind_targets(grids, 1, FIRST)[0][1:] if args.spread else (0, FIRST)  # the toggles' one-head mask
        picker = HeadPicker(rows, reserved={first_click} if args.toggles else set())
        for niceness in sorted(args.browser_niceness):           # raised only: see set_browsers_niceness
            for sessions in sorted({1, args.class_size}) if args.class_size else ():    # 0: no class at all
                for r in range(args.class_rounds if sessions > 1 else args.single_rounds):
                    classes.append(class_scenario(browser, srv, ref, picker.round(sessions), rows,
                                                  timing_log=timing_log, niceness=niceness))
                    c = classes[-1]
                    print(f"class of {sessions} (browsers at niceness {niceness}, round {r + 1}): click -> metric "
                          f"{c['to_metric_s']} (sent by the server: {c['to_metric_sent_s']}), all correct "
                          f"{c['all_correct']}, clicks lost {c['clicks_lost']}, CPU s to the last metric {c['cpu_s_to_last_metric']}, server memory "
                          f"{c['server_memory_mib']} MiB, load {c['load_average_1min']}", flush=True)
        if args.random_clicks and args.class_size:
            set_browsers_niceness(max(args.browser_niceness))
            random_class = random_moments(browser, srv, ref, args.class_size, args.random_clicks, args.random_span,
                                          rows, seed=0, picker=picker)
            print(f"class of {args.class_size} clicking {args.random_clicks} heads each at random moments over "
                  f"{args.random_span} s: {random_class['clicks_lost']} of {random_class['clicks']} clicks lost, "
                  f"{random_class['heads_wrongly_removed']} heads wrongly removed, all metrics correct "
                  f"{random_class['all_correct']}", flush=True)
    settings = {"toggles": args.toggles, "busy": args.busy, "class_size": args.class_size, "limit": args.limit,
                "class_rounds": args.class_rounds, "single_rounds": args.single_rounds, "browser_niceness": args.browser_niceness,
                "clicks": ("each attention kind in turn (" + ", ".join(ref.loaded.layout.kinds) + "), one head per layer, "
                           "last layer first") if args.spread else "the first kept heads (layer 0)",
                "window": "1366x900 Chromium (headless)"}
    result = {"format": BENCH_FORMAT, "kind": "dashboard_timings", "model": args.model, "task": args.task,
              "what": "seconds from a head click in Chromium until the new mask's metric and loss are drawn "
                      "(click_to_metric) and until its latency is drawn (click_to_latency) on the Head map; the "
                      "server's CPU seconds to the metric beside one forward pass over the same examples; a class "
                      "of sessions clicking at once, each metric checked against the library's evaluation of its "
                      "link's mask",
              "runs": runs, "class": classes, "class_pooled": pooled(classes),
              "class_over_single": class_over_single(pooled(classes)),
              "class_random_moments": random_class if args.random_clicks and args.class_size else None,
              "class_heads_clicked_twice": picker.repeats if args.class_size else 0, "cpu_threads": os.cpu_count(),
              "cpu": cpu_description(),
              "provenance": provenance(ref.loaded, task=args.task, n_examples=args.limit,
                                       method="dashboard_timings", settings=settings, device="cpu"),
              "command": " ".join(["python", "benchmarks/dashboard_timings.py", *(argv if argv is not None else sys.argv[1:])]), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    storage.write_json(Path(args.out), result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
