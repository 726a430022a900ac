"""The Head map's scoring of a slow model in Debian's Chromium: time and the server's peak memory.

    .venv/bin/python benchmarks/headmap_memory.py          # Whisper-base: results/headmap_memory-whisper-base.json
    .venv/bin/python benchmarks/headmap_memory.py --model smollm2 --task movie-text

One dashboard server, one session at 1366 x 768: the Head map opens (a slow model's scoring waits for a
click, its button shows the time estimate), the button is clicked, and the script waits until the map
is coloured by the scores. It records the estimate the button showed, the seconds from the click to
the coloured map, the server's resident memory sampled every 0.5 s and its kernel-recorded peak
(VmHWM), against the memory budget the dashboard holds itself to (``pruning_core.bench.budget``), and the
1-minute load average. One run on one machine, never a test threshold. Needs the prepared model,
Chromium (`make browser`) and Playwright.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_helpers import DashboardServer, chromium_browser, chromium_path, wait_idle  # noqa: E402

RUN_SCORING = "Run: Scoring heads"


def memory_mib(pid: int) -> dict:
    fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
    return {k: round(int(fields[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="whisper-base")
    parser.add_argument("--task", default="movie-speech")
    parser.add_argument("--out", default=None, help="default: benchmarks/results/headmap_memory-MODEL.json")
    args = parser.parse_args(argv)
    from pruning_core.bench import budget
    from pruning_core.core.io import storage

    path = chromium_path()
    if path is None:
        print("Chromium is not installed: run `make browser` (apt-get install chromium).", file=sys.stderr)
        return 2
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"headmap_memory-{args.model}.json")
    log = ROOT / "test-artifacts" / "headmap_memory-streamlit.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {"HEADPRUNE_APP_MODEL": args.model, "HEADPRUNE_APP_TASK": args.task, "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "HEADPRUNE_APP_DEVICE": "cpu"}
    opened = time.perf_counter()
    with DashboardServer(env, log) as srv, chromium_browser(path) as browser:
        page = browser.new_context(viewport={"width": 1366, "height": 768}).new_page()
        page.set_default_timeout(900_000)
        page.goto(f"{srv.url}/head_map")
        wait_idle(page, 900_000)
        button = page.get_by_role("button", name=RUN_SCORING).first
        button.wait_for(timeout=600_000)
        loaded = {"seconds": round(time.perf_counter() - opened, 1), "memory_mib": memory_mib(srv.proc.pid),
                  "load_average_1min": round(os.getloadavg()[0], 2)}
        label, load_before = button.text_content(), round(os.getloadavg()[0], 2)
        started, peak = time.perf_counter(), 0.0
        button.click()
        while time.perf_counter() - started < 1800:
            peak = max(peak, memory_mib(srv.proc.pid)["VmRSS"])
            if page.get_by_role("button", name=RUN_SCORING).count() == 0 and \
                    page.get_by_text("Scoring heads").count() == 0:
                break
            time.sleep(0.5)
        took = round(time.perf_counter() - started, 1)
        wait_idle(page, 900_000)
        after = memory_mib(srv.proc.pid)
    result = {"format": "headprune.bench/1", "kind": "headmap_memory", "model": args.model, "task": args.task,
              "what": "the Head map's scoring started by its button: seconds from the click to the coloured map, "
                      "the server's resident memory (sampled every 0.5 s; VmHWM is the kernel's peak)",
              "page_loaded": loaded, "button": label, "scoring_seconds": took, "peak_rss_sampled_mib": peak,
              "vm_hwm_mib": after["VmHWM"], "rss_after_mib": after["VmRSS"],
              "memory_budget_mib": round(limit / 2 ** 20, 1) if (limit := budget.memory_budget()) else None,
              "load_average_1min": {"before": load_before, "after": round(os.getloadavg()[0], 2)},
              "cpu_threads": os.cpu_count(), "command": "python benchmarks/headmap_memory.py "
              + " ".join(argv if argv is not None else sys.argv[1:]),
              "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    storage.write_json(out, result)
    print(f"scoring {took} s (button: {label}); server peak {after['VmHWM']} MiB of a "
          f"{result['memory_budget_mib']} MiB budget; wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
