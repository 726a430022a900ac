"""The Tour page's load times in Debian's Chromium: each step's first visit (it computes) and its
link opened afterwards by new sessions (students; served from the server's cache).

    .venv/bin/python benchmarks/tour_timings.py                     # the default: results/tour_timings.json
    .venv/bin/python benchmarks/tour_timings.py --model smollm2     # SmolLM2: results/tour_timings-smollm2.json

One dashboard server. First visit: one session opens the tour's first step and follows every Next
button; a step counts as loaded when its link (drawn last, after the step's figure) names it and
Streamlit has stopped running. Afterwards: ``--repeats`` rounds in which a new browser session
opens each step's link (the address a teacher projects), timed from the request to the same point.
Every figure records the 1-minute load average. Numbers describe one run on one machine, never a
test threshold. Needs the prepared model, Chromium (`make browser`) and Playwright.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_helpers import DashboardServer, chromium_browser, chromium_path, new_page  # noqa: E402

from app.tour import steps as tour  # noqa: E402
from pruning_core.core.io import storage  # noqa: E402
from pruning_core.modeling.sources import catalog  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DRAWN = ("([name]) => [...document.querySelectorAll('[data-testid=\"stCode\"]')]"
         ".some(e => e.textContent.includes('/tour?') && e.textContent.includes('step=' + name))"
         " && !document.querySelector('[data-testid=\"stStatusWidgetRunningIcon\"]')"
         " && !document.querySelector('[data-testid=\"stStatusWidgetRunningManIcon\"]')"
         " && !document.querySelector('[data-testid=\"stSkeleton\"]')")


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _wait_drawn(page, name: str, timeout_s: float) -> None:
    """Wait until step ``name`` is drawn (its link shows and the script has stopped)."""
    page.wait_for_function(DRAWN, arg=[name], timeout=timeout_s * 1000, polling=50)
    if page.locator('[data-testid="stException"]').count():
        raise AssertionError(f"step {name} shows a traceback")


def measure(url: str, model_key: str, repeats: int, first_timeout_s: float) -> dict:
    models = {m.key: m for m in tour.tour_models(catalog.DEFAULT, catalog.get(catalog.DEFAULT).task)}
    model = models[model_key]
    first, links = [], {}
    with chromium_browser(chromium_path()) as browser:
        page = new_page(browser, height=1400)
        started = time.perf_counter()
        page.goto(f"{url}/tour?model={model.spec}&task={model.task}&step={tour.STEPS[0].name}")
        for n, step in enumerate(tour.STEPS):
            load = _load()
            _wait_drawn(page, step.name, first_timeout_s)
            seconds = time.perf_counter() - started
            first.append({"step": step.name, "seconds": round(seconds, 2), "load_before": load, "load_after": _load()})
            links[step.name] = page.locator('[data-testid="stCode"]').filter(has_text="/tour?").first.inner_text()
            print(f"first visit {step.name}: {seconds:.2f} s (load {load})", flush=True)
            if n + 1 < len(tour.STEPS):
                started = time.perf_counter()
                page.get_by_role("button", name="Next:").click()
        page.context.close()
        after = {step.name: [] for step in tour.STEPS}
        loads = []
        for _ in range(repeats):
            for step in tour.STEPS:
                fresh = new_page(browser, height=1400)            # a student's new session
                loads.append(_load())
                started = time.perf_counter()
                fresh.goto(links[step.name])
                _wait_drawn(fresh, step.name, 120)
                after[step.name].append(round(time.perf_counter() - started, 2))
                fresh.context.close()
    return {"first_visit": first, "links": links,
            "after_first_visit": {name: {"median_s": statistics.median(v), "max_s": max(v), "runs": v}
                                  for name, v in after.items()},
            "after_first_visit_load": {"min": min(loads), "max": max(loads)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["default", "smollm2", "translation"], default="default")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--first-timeout", type=float, default=1800, help="seconds a step's first visit may take")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out or RESULTS / ("tour_timings.json" if args.model == "default" else f"tour_timings-{args.model}.json")
    env = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with DashboardServer(env, Path(os.environ.get("TMPDIR", "/tmp")) / "tour-timings-streamlit.log") as server:
        result = measure(server.url, args.model, args.repeats, args.first_timeout)
    result = {"format": "headprune.tour_timings/1", "model": args.model, **result,
              "how": "Chromium (Playwright), one dashboard server; a step is loaded when its link (drawn last) names "
                     "it and the script stopped; 'after' = a new browser session opening the step's link",
              "machine": {"cpus": os.cpu_count(), "torch_threads": _threads()},
              "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    storage.write_json(out, result)
    print(f"wrote {out}")


def _threads() -> int:
    import torch
    return torch.get_num_threads()


if __name__ == "__main__":
    main()
