"""Dashboard timings on the embedded default (MiniLM-L6) in Debian's Chromium: warm page renders,
toggle -> metric and toggle -> latency on the Head map.

    .venv/bin/python benchmarks/dashboard_timings.py            # writes benchmarks/results/dashboard_timings.json
    .venv/bin/python benchmarks/dashboard_timings.py --model /path/to/folder --task sst2 --out other.json

Needs the prepared default (`headprune prepare`) or --model, Chromium (`make browser`) and
Playwright. Takes about 3 minutes on 2 CPU cores (the first visit of the Curves page fills its
caches). Numbers depend on the machine and its load: the load average is recorded beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_helpers import (DashboardServer, chromium_browser, chromium_path, click_point, head_points,  # noqa: E402
                             metric_value, new_page, process_cpu_s, wait_idle, wait_metric)

RESULTS = ROOT / "benchmarks" / "results"


def measure(browser, model: str, task: str, log: Path, toggles: int = 3) -> dict:
    """Open the dashboard on ``model``: warm render of three pages, then ``toggles`` head clicks."""
    env = {"HEADPRUNE_APP_MODEL": model, "HEADPRUNE_APP_TASK": task, "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu"}
    with DashboardServer(env, log) as srv:
        page = new_page(browser, height=1400)
        page.goto(f"{srv.url}/head_map")                     # cold: loads, scores, evaluates, times
        wait_metric(page, "heads kept", lambda v: " / " in v, timeout_s=600)
        wait_idle(page, 600_000)
        renders = {}
        for name in ("model_data", "head_map", "curves"):
            page.goto(f"{srv.url}/{'' if name == 'model_data' else name}")
            wait_idle(page, 900_000)                          # first visit fills the caches (curves: minutes)
            started = time.perf_counter()
            page.reload()
            wait_idle(page)
            renders[name] = round(time.perf_counter() - started, 3)
        page.goto(f"{srv.url}/head_map")
        wait_idle(page)
        clicks = []
        for i in range(toggles):
            kept_before = metric_value(page, "heads kept")
            started, cpu0 = time.perf_counter(), process_cpu_s(srv.proc.pid)
            click_point(page, head_points(page).nth(3 + 2 * i))
            wait_metric(page, "heads kept", lambda v: v != kept_before)   # drawn after the metric and loss
            to_metric, cpu1 = time.perf_counter() - started, process_cpu_s(srv.proc.pid)
            wait_idle(page)
            clicks.append({"to_metric_s": round(to_metric, 3), "server_cpu_to_metric_s": round(cpu1 - cpu0, 3),
                           "to_latency_s": round(time.perf_counter() - started, 3),
                           "server_cpu_to_latency_s": round(process_cpu_s(srv.proc.pid) - cpu0, 3)})
        kept_after = metric_value(page, "heads kept")
        page.context.close()
    return {"format": "headprune.dashboard_timings/1", "model": model, "task": task, "warm_render_s": renders,
            "toggles": clicks, "heads_kept_after": kept_after, "cpu_threads": os.cpu_count(),
            "load_average": os.getloadavg(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="'default' (prepared) or a local model folder")
    parser.add_argument("--task", default="movie-sentiment")
    parser.add_argument("--out", default=str(RESULTS / "dashboard_timings.json"))
    args = parser.parse_args(argv)
    from pruning_core.models import default_model_dir

    if args.model == "default" and not (default_model_dir() / "config.json").is_file():
        print("The embedded default is not prepared: run `headprune prepare` first.", file=sys.stderr)
        return 2
    path = chromium_path()
    if path is None:
        print("Chromium is not installed: run `make browser` (apt-get install chromium).", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with chromium_browser(path) as browser:
        log = ROOT / "test-artifacts" / "dashboard_timings-streamlit.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        result = measure(browser, args.model, args.task, log)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
