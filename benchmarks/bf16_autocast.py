"""Would bf16 arithmetic (CPU autocast through oneDNN) make a click faster, and how far would its figures move?

For each prepared model: ``task.evaluate`` of the dashboard's default examples in float32 and under
``torch.autocast("cpu", torch.bfloat16)`` (matrix products in bf16, norms and softmax in float32), medians of
``--repeats`` wall times, the metric and loss of both; for Whisper also its encoder alone on 8 windows of 30 s.
headprune evaluates in float32 on CPU; this measures the route, it changes nothing.

    .venv/bin/python benchmarks/bf16_autocast.py            # -> benchmarks/results/bf16_autocast.json
"""
from __future__ import annotations

import argparse
import statistics
import time

from live_common import RESULTS, load_1min, machine

import torch  # noqa: E402

from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402
from pruning_core.tasks import get_task  # noqa: E402

CASES = (("whisper-base", "movie-speech", 8), ("bergamot-en-pt", "bible-en-pt", 128),
         ("smollm2", "movie-text", 16), ("default", "movie-sentiment", 128))


def timed(fn, repeats: int) -> tuple[dict, object]:
    """Median, min and max wall seconds of ``repeats`` calls, and the last call's value."""
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(round(time.perf_counter() - t, 3))
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "n": repeats}, out


def bf16(fn):
    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return fn()
    return run


def case(model: str, task_name: str, limit: int, repeats: int) -> dict:
    loaded = load_model(model)
    task = get_task(task_name)
    data = task.encode(loaded, task.default_split, limit)
    row = {"model": model, "task": task_name, "examples": data.n_examples, "split": task.default_split,
           "load_before": load_1min()}
    for name, fn in (("float32", lambda: task.evaluate(loaded, data)),
                     ("bf16_autocast", bf16(lambda: task.evaluate(loaded, data)))):
        timing, res = timed(fn, repeats)
        row[name] = {**timing, "metric": res.metric, "metric_name": res.metric_name, "loss": res.loss}
    row["speedup"] = round(row["float32"]["median_s"] / row["bf16_autocast"]["median_s"], 2)
    row["metric_change"] = row["bf16_autocast"]["metric"] - row["float32"]["metric"]
    row["loss_change"] = row["bf16_autocast"]["loss"] - row["float32"]["loss"]
    if model == "whisper-base":
        encoder = loaded.model.get_encoder()
        x = torch.randn(8, loaded.model.config.num_mel_bins, 3000, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            t32, y32 = timed(lambda: encoder(x).last_hidden_state, repeats)
            t16, y16 = timed(bf16(lambda: encoder(x).last_hidden_state), repeats)
        row["encoder_8x30s"] = {"float32": t32, "bf16_autocast": t16,
                                "speedup": round(t32["median_s"] / t16["median_s"], 2),
                                "relative_error": float((y32 - y16.float()).norm() / y32.norm())}
    row["load_after"] = load_1min()
    print(f"{model}: float32 {row['float32']['median_s']} s, bf16 {row['bf16_autocast']['median_s']} s "
          f"({row['speedup']}x); {row['float32']['metric_name']} {row['float32']['metric']:.4f} -> "
          f"{row['bf16_autocast']['metric']:.4f}, loss {row['loss_change']:+.5f}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="*", default=[c[0] for c in CASES])
    ap.add_argument("--out", default=str(RESULTS / "bf16_autocast.json"))
    args = ap.parse_args()
    torch.set_num_threads(2)
    rows = [case(m, t, n, args.repeats) for m, t, n in CASES if m in args.models]
    write_json(args.out, {"format": "headprune.bench/1", "kind": "bf16_autocast", "what": __doc__.splitlines()[0],
                          "machine": machine(), "rows": rows,
                          "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
