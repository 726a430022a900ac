"""A page click against the model work it needs: a dashboard run's masks again, in its order, in the library.

    .venv/bin/python benchmarks/click_work.py benchmarks/results/dashboard_timings-bergamot-quiet-drafts.json
    HEADPRUNE_HOME=... .venv/bin/python benchmarks/click_work.py benchmarks/results/dashboard_timings-qwen-quiet-2.json

Reads the masks a ``dashboard_timings.py`` run clicked (each toggle's ``mask``, the page's link form), then, in this
process and with the server's threads, evaluates all heads (as the page does when it opens) and each mask in turn
through the server's own call (``app.model.cache.evaluate``: the shared layer-input cache, the drafts of earlier
masks, the metric before the loss), timing each to its metric in wall and CPU seconds. Per click, against that
work: the server's time from the click to sending the metric (wall, and its CPU: the issue's aim, 1.2 at most) and
the page's click -> metric. Run it right after the page run, on the same quiet machine.
Writes ``benchmarks/results/click_work-<model>.json`` (``--out``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")      # as dashboard.py sets it

import torch  # noqa: E402

from live_common import load_1min, machine  # noqa: E402
from app.core.session.selection import Selection  # noqa: E402
from app.model import cache  # noqa: E402
from pruning_core.core.io.share_link import decode_mask  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.evaluation.results import read_json  # noqa: E402

FORMAT = "headprune.click_work/1"


def timed(sel: Selection, mask) -> dict:
    """Wall and CPU seconds (this process, every thread) to ``mask``'s metric (the evaluation's first report
    carrying it) and to its end."""
    seen: list[tuple[float, float]] = []
    start, cpu = time.perf_counter(), time.process_time()

    def note(event) -> None:
        if event.partial is not None and not seen:
            seen.append((time.perf_counter() - start, time.process_time() - cpu))

    cache.evaluate(sel, mask, note)
    end = (time.perf_counter() - start, time.process_time() - cpu)
    metric = seen[0] if seen else end
    return {"to_metric_s": round(metric[0], 3), "cpu_to_metric_s": round(metric[1], 3), "total_s": round(end[0], 3)}


def _ratio(a: float | None, b: float) -> float | None:
    return None if a is None else round(a / b, 3)


def replay(page: dict) -> dict:
    settings = page["provenance"]["settings"]
    sel = Selection(page["model"], page["task"], int(settings["limit"]))
    layout = cache.load(sel.model).layout
    all_heads = timed(sel, None)
    clicks = []
    for toggle in page["runs"][0]["toggles"]:
        work = timed(sel, decode_mask(toggle["mask"], layout))
        sent, cpu = toggle.get("to_metric_sent_s"), toggle.get("server_cpu_to_metric_sent_s")
        clicks.append({"kind": toggle["kind"], "layer": toggle["layer"], "library": work,
                       "page_to_metric_s": toggle["to_metric_s"], "server_to_metric_sent_s": sent,
                       "server_cpu_to_metric_sent_s": cpu,
                       "server_over_work": _ratio(sent, work["to_metric_s"]),
                       "server_cpu_over_work_cpu": _ratio(cpu, work["cpu_to_metric_s"]),
                       "page_over_work": _ratio(toggle["to_metric_s"], work["to_metric_s"]), "load_1min": load_1min()})
    summary = {}
    for key in ("server_over_work", "server_cpu_over_work_cpu", "page_over_work"):
        values = [c[key] for c in clicks if c[key] is not None]
        summary[key] = {"median": statistics.median(values), "max": max(values), "n": len(values)} if values else None
    return {"model": sel.model, "task": sel.task, "examples": sel.eval_size, "page_run": page["created"],
            "all_heads": all_heads, "clicks": clicks, **summary,
            "page_median_s": statistics.median(c["page_to_metric_s"] for c in clicks),
            "library_median_s": statistics.median(c["library"]["to_metric_s"] for c in clicks)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="a dashboard_timings.py JSON whose toggles record their masks")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    page = read_json(args.page)
    if not all("mask" in t for t in page["runs"][0]["toggles"]):
        raise SystemExit(f"{args.page} records no masks: rerun dashboard_timings.py (it records them since "
                         "click_work.py exists)")
    load_before = load_1min()
    result = replay(page)
    out = args.out or ROOT / "benchmarks" / "results" / f"click_work-{result['model']}.json"
    doc = {"format": FORMAT, **result, "page_file": args.page.name, "torch_threads": torch.get_num_threads(),
           "cpu": machine(), "load_before": load_before, "load_after": load_1min(),
           "command": "python benchmarks/click_work.py " + " ".join(sys.argv[1:]),
           "created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
    print(f"{result['model']}: page {result['page_median_s']:.2f} s, library {result['library_median_s']:.2f} s to "
          f"the metric; server / work {result['server_over_work']}, in CPU {result['server_cpu_over_work_cpu']}, "
          f"page / work {result['page_over_work']}")
    print(f"wrote {write_json(out, doc)}")


if __name__ == "__main__":
    main()
