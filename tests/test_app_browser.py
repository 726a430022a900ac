"""End-to-end: the dashboard in a real browser (Debian's Chromium driven by Playwright).

Starts ``streamlit run dashboard.py`` on a free localhost port on a tiny model, clicks a head on
the head map and checks that the metric and the kept-head count change, opens the shared link in
a fresh browser session and checks the same mask shows, and saves a screenshot of every page to
test-artifacts/screenshots/. Skipped when Chromium is not installed (``make browser``).
"""
from __future__ import annotations

import json
import time

import pytest

from browser_helpers import ARTIFACTS, CHROMIUM_ARGS, ROOT, DashboardServer, app_env, build_tiny_app, chromium_path

pytestmark = pytest.mark.browser
playwright = pytest.importorskip("playwright.sync_api")
TIMEOUT_MS = 90_000
PAGES = ["1_model_data", "2_head_map", "3_curves", "4_attention", "5_speed", "6_share", "7_smp_compare"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser-app")
    tiny = build_tiny_app(folder, "bert")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with DashboardServer(app_env(tiny, folder / "hp-home", eval_limit=40), ARTIFACTS.parent / "streamlit.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    path = chromium_path()
    if path is None:
        pytest.skip("Chromium is not installed (apt-get install chromium, or `make browser`)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def new_page(browser, height: int = 1000):
    context = browser.new_context(viewport={"width": 1440, "height": height})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def wait_idle(page, timeout_ms: float = TIMEOUT_MS) -> None:
    """Wait until Streamlit has finished running the script (no 'Running...' status, no skeleton)."""
    page.wait_for_selector('[data-testid="stApp"] h1', timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]')"
                           " && !document.querySelector('[data-testid=\"stStatusWidgetRunningManIcon\"]')"
                           " && !document.querySelector('[data-testid=\"stSkeleton\"]')", timeout=timeout_ms)
    page.wait_for_timeout(300)


def metric_value(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has=page.locator('[data-testid="stMetricLabel"]',
                                                                      has_text=label)).first
    box.wait_for()
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def wait_metric(page, label: str, predicate, timeout_s: float = 60) -> str:
    deadline = time.time() + timeout_s
    value = ""
    while time.time() < deadline:
        try:
            value = metric_value(page, label)
            if predicate(value):
                return value
        except playwright.Error:
            pass
        page.wait_for_timeout(100)
    raise AssertionError(f"metric {label!r} stuck at {value!r}")


def head_points(page, chart: int = 0):
    """The kept-head markers of the ``chart``-th head grid (plotly draws one path.point per head).

    Traces: two legend-only entries, then the kept heads, then the removed heads (app.headmap.figure).
    """
    grid = page.locator('[data-testid="stPlotlyChart"]').nth(chart)
    grid.locator("path.point").first.wait_for()
    return grid.locator("g.trace.scatter").nth(2).locator("path.point")


def click_point(page, point) -> None:
    box = point.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)


def test_click_a_head_then_open_the_shared_link(server, browser):
    page = new_page(browser, height=1400)
    page.goto(f"{server.url}/head_map")
    assert wait_metric(page, "heads kept", lambda v: v == "8 / 8")
    loss_before = wait_metric(page, "loss", lambda v: bool(v))
    wait_idle(page)
    points = head_points(page)
    assert points.count() == 8

    started = time.perf_counter()
    click_point(page, points.nth(1))
    wait_metric(page, "heads kept", lambda v: v == "7 / 8")
    loss_after = wait_metric(page, "loss", lambda v: v != loss_before)
    toggle_to_metric = time.perf_counter() - started
    wait_idle(page)                                                 # the latency probe ends the run
    wait_metric(page, "latency (pruned)", lambda v: v.endswith("ms"))
    toggle_to_latency = time.perf_counter() - started
    assert loss_after != loss_before
    page.screenshot(path=str(ARTIFACTS / "headmap-after-click.png"), full_page=True)

    shared = page.evaluate("location.href")              # (page.url misses history.replaceState)
    assert "mask=" in shared and "model=" in shared and "task=" in shared and "scorer=" in shared
    other = new_page(browser, height=1400)                         # a colleague opening the link
    other.goto(shared)
    assert wait_metric(other, "heads kept", lambda v: v == "7 / 8")
    assert wait_metric(other, "loss", lambda v: bool(v)) == loss_after
    assert head_points(other).count() == 7
    wait_idle(other)
    other.screenshot(path=str(ARTIFACTS / "shared-link.png"), full_page=True)
    (ARTIFACTS.parent / "browser-timings.json").write_text(json.dumps(
        {"model": "tiny bert (tests)", "toggle_to_metric_s": round(toggle_to_metric, 3),
         "toggle_to_latency_s": round(toggle_to_latency, 3)}, indent=1))
    other.context.close()
    page.context.close()


@pytest.mark.parametrize("file", PAGES)
def test_screenshot_every_page(server, browser, file):
    if not (ROOT / "pages" / f"{file}.py").is_file():
        pytest.skip(f"pages/{file}.py does not exist yet")
    url_path = "" if file == PAGES[0] else file.split("_", 1)[1]      # the default page lives at /
    page = new_page(browser, height=1800)       # Streamlit scrolls inside the page: a tall viewport shows it all
    started = time.perf_counter()
    page.goto(f"{server.url}/{url_path}")
    page.locator("h1").first.wait_for()
    wait_idle(page)
    seconds = time.perf_counter() - started
    assert page.locator('[data-testid="stException"]').count() == 0, f"{url_path} shows a traceback"
    page.screenshot(path=str(ARTIFACTS / f"{file}.png"), full_page=True)
    print(f"{url_path}: rendered in {seconds:.2f} s")
    page.context.close()


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) a process has used: robust to other load on the box."""
    import os

    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_timings_on_the_embedded_default(browser, tmp_path):
    """Warm page render, toggle -> metric and toggle -> latency on the real default (MiniLM-L6).

    Writes test-artifacts/default-timings.json. Skipped until the default is prepared. To time
    another model, set HEADPRUNE_TIMING_MODEL (a folder) and HEADPRUNE_TIMING_TASK.
    """
    import os

    from pruning_core.models import default_model_dir

    model = os.environ.get("HEADPRUNE_TIMING_MODEL") or "default"
    if model == "default" and not (default_model_dir() / "config.json").is_file():
        pytest.skip("the embedded default is not prepared (headprune prepare)")
    env = {"HEADPRUNE_APP_MODEL": model, "HEADPRUNE_APP_TASK": os.environ.get("HEADPRUNE_TIMING_TASK") or
           "movie-sentiment", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu"}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with DashboardServer(env, ARTIFACTS.parent / "streamlit-default.log") as srv:
        page = new_page(browser, height=1400)
        page.goto(f"{srv.url}/head_map")                     # cold: loads, scores, evaluates, times
        wait_metric(page, "heads kept", lambda v: v.endswith("/ 72"), timeout_s=600)
        wait_idle(page, 600_000)
        renders = {}
        for file in ("1_model_data", "2_head_map", "3_curves"):
            page.goto(f"{srv.url}/{'' if file == '1_model_data' else file.split('_', 1)[1]}")
            wait_idle(page, 900_000)                          # first visit fills the caches (curves: minutes)
            started = time.perf_counter()
            page.reload()
            wait_idle(page)
            renders[file] = round(time.perf_counter() - started, 3)
        page.goto(f"{srv.url}/head_map")
        wait_idle(page)
        toggles = []
        for i in range(3):
            kept_before = metric_value(page, "heads kept")
            started, cpu0 = time.perf_counter(), process_cpu_s(srv.proc.pid)
            click_point(page, head_points(page).nth(3 + 2 * i))
            wait_metric(page, "heads kept", lambda v: v != kept_before)   # drawn after the metric and loss
            to_metric, cpu1 = time.perf_counter() - started, process_cpu_s(srv.proc.pid)
            wait_idle(page)
            toggles.append({"to_metric_s": round(to_metric, 3), "server_cpu_to_metric_s": round(cpu1 - cpu0, 3),
                            "to_latency_s": round(time.perf_counter() - started, 3),
                            "server_cpu_to_latency_s": round(process_cpu_s(srv.proc.pid) - cpu0, 3)})
        n = metric_value(page, "heads kept")
        result = {"model": model, "warm_render_s": renders, "toggles": toggles, "heads_kept_after": n,
                  "cpu_threads": os.cpu_count(), "load_average": os.getloadavg()}
        (ARTIFACTS.parent / "default-timings.json").write_text(json.dumps(result, indent=1))
        print(json.dumps(result, indent=1))
        page.context.close()
