"""Helpers for the dashboard tests: tiny model folders, a dashboard server, and Debian's Chromium.

- :func:`build_tiny_app` saves a tiny random model (tests/tiny.py) with its tokenizer into a folder
  plus a small CSV task, so the dashboard runs on them (``HEADPRUNE_APP_MODEL`` /
  ``HEADPRUNE_APP_TASK``) without the real default. Used by test_app_pages.py and
  test_app_browser.py.
- :class:`DashboardServer` starts ``streamlit run dashboard.py`` on a free localhost port.
- :func:`chromium_path` / :func:`chromium_browser`: Playwright drives the system Chromium
  (``apt-get install chromium``; ``make browser``); it never downloads a browser of its own.
- Page helpers for Playwright (:func:`new_page`, :func:`wait_idle`, :func:`wait_metric`,
  :func:`head_points`, :func:`click_point`), shared by test_app_browser.py and
  benchmarks/dashboard_timings.py.
"""
from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
_WORDS = "the a good bad movie film great awful plot acting fun dull love hate it was is not very really".split()


@dataclass(frozen=True)
class TinyApp:
    model: Path          # a model folder (config.json, model.safetensors, tokenizer files)
    task: str            # "file:PATH" of a small CSV task matching the model
    arch: str


def build_tiny_app(folder: Path, arch: str = "bert", n_examples: int = 48, seed: int = 0) -> TinyApp:
    """A tiny ``arch`` model saved like a real one, and a CSV task it can be evaluated on."""
    sys.path.insert(0, str(Path(__file__).parent))
    from tiny import make_bert_tokenizer, tiny_model

    folder = Path(folder)
    model_dir = folder / f"tiny-{arch}"
    model = _spread_weights(tiny_model(arch, seed=seed), seed)
    tokenizer = make_bert_tokenizer(folder / f"tok-{arch}")
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    rng = random.Random(seed)
    if arch in ("bart", "marian", "marian-ssru"):
        rows = ["source,target"] + [f"{' '.join(rng.choices(_WORDS, k=6))},{' '.join(rng.choices(_WORDS, k=5))}"
                                    for _ in range(n_examples)]
    else:
        rows = ["text,label"] + [f"{' '.join(rng.choices(_WORDS, k=rng.randint(3, 9)))},{rng.randint(0, 1)}"
                                 for _ in range(n_examples)]
    data = folder / f"tiny-{arch}.csv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return TinyApp(model_dir, f"file:{data}", arch)


def build_tiny_llama(folder: Path) -> TinyApp:
    """A tiny Llama (4 query heads sharing 2 key/value heads) saved like a real one, and a 40-line ``.txt`` task."""
    sys.path.insert(0, str(Path(__file__).parent))
    from tiny import make_bert_tokenizer, tiny_model

    model_dir = folder / "tiny-llama"
    _spread_weights(tiny_model("llama"), 0).save_pretrained(model_dir)
    make_bert_tokenizer(folder / "tok").save_pretrained(model_dir)
    rng = random.Random(0)
    text = folder / "docs.txt"
    text.write_text("\n".join(" ".join(rng.choices(_WORDS, k=rng.randint(6, 14))) for _ in range(40)) + "\n")
    return TinyApp(model_dir, f"file:{text}", "llama")


def build_tiny_whisper(folder: Path) -> TinyApp:
    """A tiny Whisper saved like a real one, and a speech listing of four 0.75 s noise clips with their texts."""
    import numpy as np

    from pruning_core.tasks.data import speech
    sys.path.insert(0, str(Path(__file__).parent))
    from tiny import make_bert_tokenizer, tiny_model

    model_dir = folder / "tiny-whisper"
    _spread_weights(tiny_model("whisper"), 0).save_pretrained(model_dir)
    make_bert_tokenizer(folder / "tok").save_pretrained(model_dir)
    audio = folder / "audio"
    audio.mkdir()
    rng = np.random.default_rng(0)
    for i, text in enumerate(["the movie was good", "it was a bad film", "great plot", "dull acting"]):
        (audio / f"{i}.wav").write_bytes(speech.encode_wav(rng.normal(0, 0.1, 12000).astype(np.float32)))
        (audio / f"{i}.txt").write_text(text)
    return TinyApp(model_dir, f"speech:{audio}", "whisper")


def _spread_weights(model, seed: int):
    """Re-draw the weights wider than the config's 0.02 so that every head visibly matters."""
    import torch

    torch.manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.normal_(0.0, 0.4)
            elif isinstance(module, torch.nn.Embedding):
                module.weight.normal_(0.0, 1.0)
    return model


def app_env(tiny: TinyApp, home: Path, eval_limit: int | None = None) -> dict[str, str]:
    """Environment variables that point the dashboard at ``tiny`` (and at an empty headprune home)."""
    env = {"HEADPRUNE_APP_MODEL": str(tiny.model), "HEADPRUNE_APP_TASK": tiny.task,
           "HEADPRUNE_HOME": str(home), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "HEADPRUNE_APP_DEVICE": "cpu", "OMP_NUM_THREADS": "1"}
    if eval_limit is not None:
        env["HEADPRUNE_APP_EVAL_LIMIT"] = str(eval_limit)
    return env


# -- the dashboard server --------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ``streamlit`` as its command runs it, with every thread's stack written to its log on SIGUSR1 (thread_dump)
STARTER = ("import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR1, all_threads=True); "
           "from streamlit.web.cli import main; sys.argv[0] = 'streamlit'; sys.exit(main())")
DUMP_WAIT_S = 10.0


class DashboardServer:
    """``streamlit run dashboard.py`` on 127.0.0.1:<free port>, stopped on exit (its own process only)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        first = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []       # e.g. a benchmark's observer
        self.env = {**os.environ, **env, "PYTHONPATH": os.pathsep.join([*first, str(ROOT)])}
        self.log_path = log
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "DashboardServer":
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", STARTER, "run", str(ROOT / "dashboard.py"), "--server.port", str(self.port),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"streamlit did not become healthy within 60 s; see {self.log_path}")

    def thread_dump(self) -> str:
        """Every thread's Python stack in the server now (a failed test's evidence of what the server was doing),
        or why there is none."""
        if self.proc is None or self.proc.poll() is not None:
            return f"the server is not running (exit code {None if self.proc is None else self.proc.returncode})"
        self.log.flush()
        start = self.log_path.stat().st_size
        os.kill(self.proc.pid, signal.SIGUSR1)
        deadline, text = time.time() + DUMP_WAIT_S, ""
        while time.time() < deadline:
            time.sleep(0.2)
            with open(self.log_path, errors="replace") as f:
                f.seek(start)
                now = f.read()
            if now and now == text:          # written, and nothing more for a moment
                return now
            text = now
        return text or f"the server wrote no stacks within {DUMP_WAIT_S:.0f} s"

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


HOLDS_PLUGIN = Path(__file__).resolve().parent / "browser" / "holds"     # its sitecustomize.py


class Holds:
    """The test's side of ``tests/browser/holds/sitecustomize.py``: work the dashboard server holds until the
    test releases it. Give the server :meth:`env`; then :meth:`arm` a hold on one mask's work, act, wait for the
    server's record that it holds that work (:meth:`wait_held`), act again, and :meth:`release` it."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(HOLDS_PLUGIN), "HEADPRUNE_TEST_HOLDS": str(self.folder)}

    def arm(self, what: str, mask) -> None:
        """Hold the server's ``what`` ("evaluation", "decoding" or "latency") of ``mask`` when it comes."""
        from pruning_core.core.io.share_link import encode_mask

        (self.folder / f"{what}.held").unlink(missing_ok=True)
        (self.folder / f"{what}.hold").write_text(encode_mask(mask), encoding="utf-8")

    def wait_held(self, what: str, timeout_s: float = 240) -> None:
        """Wait for the server's record that it holds the armed ``what``."""
        held, deadline = self.folder / f"{what}.held", time.time() + timeout_s
        while not held.exists():
            if time.time() > deadline:
                raise AssertionError(f"the server never reached the armed {what} in {timeout_s} s")
            time.sleep(0.05)

    def release(self, what: str | None = None) -> None:
        """Let the held ``what`` (every hold: ``None``) go on."""
        for hold in self.folder.glob(f"{what or '*'}.hold"):
            hold.unlink(missing_ok=True)


@contextlib.contextmanager
def tiny_dashboard(folder: Path, arch: str, eval_limit: int):
    """A dashboard server on a tiny ``arch`` model built in ``folder`` (its own headprune home)."""
    tiny = build_tiny_app(folder, arch)
    with DashboardServer(app_env(tiny, folder / "home", eval_limit=eval_limit), folder / "server.log") as srv:
        yield srv


def chromium_path() -> str | None:
    """Debian's Chromium, if installed (``make browser`` installs it)."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium") or "", shutil.which("chromium-browser") or ""):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@contextlib.contextmanager
def chromium_browser(path: str):
    """Headless Chromium at ``path`` driven by Playwright; closed on leaving the block."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


# -- driving a dashboard page in Chromium (Playwright) ---------------------------------------------
TIMEOUT_MS = 90_000


# The page's last presses, releases and clicks (what each landed on), for a failed wait to report.
_RECORD_INPUT = """(() => {
  const seen = window.__hpInput = [], t0 = performance.now();
  const what = (e) => {
    const t = e.target, b = t && t.closest && t.closest("button");
    const button = b ? ` in button "${b.innerText.trim().slice(-12)}"${b.disabled ? " (disabled)" : ""}` : "";
    return (t && t.tagName || "?") + button + (t && t.isConnected === false ? " (detached)" : "");
  };
  for (const kind of ["pointerdown", "pointerup", "click"])
    addEventListener(kind, (e) => { seen.push(`${Math.round(performance.now() - t0)} ms ${kind} ${what(e)}`);
                                    seen.splice(0, seen.length - 30); }, { capture: true });
})();"""


def new_page(browser, height: int = 1000):
    context = browser.new_context(viewport={"width": 1440, "height": height})
    context.add_init_script(_RECORD_INPUT)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def wait_idle(page, timeout_ms: float = TIMEOUT_MS) -> None:
    """Wait until Streamlit has finished running the script (no 'Running...' status, no skeleton)."""
    page.wait_for_selector('[data-testid="stApp"] h1', timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]')"
                           " && !document.querySelector('[data-testid=\"stStatusWidgetRunningManIcon\"]')"
                           " && !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=timeout_ms,
                           polling=POLL_MS)
    page.wait_for_timeout(300)


def metric_value(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has=page.locator('[data-testid="stMetricLabel"]',
                                                                      has_text=label)).first
    box.wait_for()
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def wait_metric(page, label: str, predicate, timeout_s: float = 60) -> str:
    from playwright.sync_api import Error as PlaywrightError

    deadline = time.time() + timeout_s
    value = ""
    while time.time() < deadline:
        try:
            value = metric_value(page, label)
            if predicate(value):
                return value
        except PlaywrightError:
            pass
        page.wait_for_timeout(100)
    raise AssertionError(f"metric {label!r} stuck at {value!r}")


def head_points(page, chart: int = 0):
    """The kept-head markers of the ``chart``-th head grid (plotly draws one path.point per head).

    Traces: two legend-only entries, then the kept heads, then the removed heads (app.headmap.figures.figure).
    """
    grid = page.locator('[data-testid="stPlotlyChart"]').nth(chart)
    grid.locator("path.point").first.wait_for()
    return grid.locator("g.trace.scatter").nth(2).locator("path.point")


LIVE_STRIP = ".st-key-hp_live_strip"          # app.headmap.panel.STRIP_KEY: heads kept · metric · loss, one element


POLL_MS = 100      # how often a wait checks the page: Playwright's default ("raf") checks on every animation
#                    frame, which makes the page draw 60 frames a second while it waits (CPU the server needs)


def wait_live(page, kept: str, timeout_s: float = 120) -> str:
    """Wait until the Head map's live loop shows ``kept`` heads (e.g. "7 / 8") with its metric and loss
    drawn (no "updating…", and no "computing…": a translation's BLEU comes before its loss); returns the strip's
    text. The strip is written in one piece, so it never shows a new count beside an old metric (its text is read
    also when CSS hides it on wide windows). It is written after the panel's metric and loss, except when the mask's
    figures were already known: then the run draws the strip first and the panel a moment later."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            "([sel, kept]) => { const s = document.querySelector(sel);"
            " return !!s && s.textContent.includes(kept) && !s.textContent.includes('updating')"
            " && !s.textContent.includes('computing'); }",
            arg=[LIVE_STRIP, kept], timeout=timeout_s * 1000, polling=POLL_MS)
    except PlaywrightTimeout:
        raise AssertionError(f"the live strip never showed {kept!r} settled in {timeout_s} s: "
                             f"{page_state(page)}") from None
    return page.locator(LIVE_STRIP).text_content()


def page_state(page) -> str:
    """What a failed wait saw: the live strip, the link, the page's click log, its last presses and clicks,
    and a screenshot's path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"stuck-{time.strftime('%H%M%S')}-{random.randrange(10**6)}.png"
    page.screenshot(path=str(shot), full_page=True)
    seen = page.evaluate(
        "([sel]) => { const s = document.querySelector(sel); const log = window.__hpMapClicks;"
        " return {strip: s && s.textContent, url: location.href, clicks: log && log.clicks,"
        " running: !!document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]'), input: window.__hpInput};"
        " }", [LIVE_STRIP])
    return f"{seen} (screenshot {shot})"


def in_viewport(locator) -> bool:
    """Whether the element is drawn (non-zero size) and lies wholly inside the browser window."""
    return locator.evaluate("e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0 &&"
                            " r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; }")


def square_center(page, layer: int, head: int, chart: int = 0) -> tuple[float, float]:
    """Where head (layer, head) of the ``chart``-th grid is on screen now, from the figure's own axes (a square
    keeps its place whether its head is kept or removed; the kept markers are renumbered)."""
    return tuple(page.evaluate(
        """([chart, layer, head]) => {
          const gd = document.querySelectorAll('[data-testid="stPlotlyChart"] .js-plotly-plot')[chart];
          const L = gd._fullLayout, r = gd.getBoundingClientRect();
          return [r.left + L.xaxis._offset + L.xaxis.c2p(head), r.top + L.yaxis._offset + L.yaxis.c2p(layer)];
        }""", [chart, layer, head]))


def click_point(page, point) -> None:
    box = point.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) a process has used: robust to other load on the box."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ok(at):
    """``at`` (a Streamlit ``AppTest`` after a run) with no exception and no error shown; returns it."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def predictions(at) -> dict[str, str]:
    """The Attention page's two answers, ``{"Prediction, all heads": text, ...}``: each is a column
    holding a caption (whose answer) and the answer in bold Markdown, escaped (app.core.text.md_escape)."""
    import re

    out = {}
    for col in at.columns:
        captions = [c.value for c in col.caption]
        if captions and captions[0].startswith("Prediction") and col.markdown:
            shown = col.markdown[0].value
            shown = shown[2:-2] if shown.startswith("**") else shown[1:-1]      # bold answer, italic "(empty …)"
            out[captions[0]] = re.sub(r"\\(.)", r"\1", shown)
    return out


def open_app(monkeypatch, home, tiny, page: str | None, mask: str | None = None, eval_limit: int | None = 12,
             timeout: int = 180):
    """An ``AppTest`` of the dashboard on ``tiny`` (HEADPRUNE_HOME = ``home``), opened on ``page`` (``None``:
    the first page), optionally by a link carrying ``mask`` in the URL's text form; ``eval_limit`` ``None``
    leaves the dashboard's own example count."""
    from streamlit.testing.v1 import AppTest

    for key, value in app_env(tiny, home, eval_limit).items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(ROOT / "dashboard.py"), default_timeout=timeout)
    if mask:
        at.query_params["mask"] = mask
    at.run()
    if page is not None:
        at.switch_page(page).run()
    return at

