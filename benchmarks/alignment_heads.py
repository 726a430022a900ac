"""Speech alignment heads (issue 47, goal 6): the audio-alignment role's top cross-attention heads of Whisper-base
beside the eight ``alignment_heads`` its generation config lists (the heads OpenAI's word timestamps read).

    .venv/bin/python benchmarks/alignment_heads.py                 # Whisper-base, 24 sentences: ~1-3 min on 2 cores

The probe: movie-speech sentences spoken by espeak-ng, transcripts teacher-forced (the ``text`` probe of
:mod:`pruning_core.analysis.roles.probes`); the score: :mod:`pruning_core.analysis.roles.alignment`. Beside it, the
first-token score's top heads (attention parked on the first frame) as a contrast, and the chance level (the
expected hits of as many heads drawn at random). Writes ``benchmarks/results/alignment_heads.json``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.analysis.roles import compute_roles  # noqa: E402
from pruning_core.analysis.roles.alignment import compare_listed, listed_alignment_heads  # noqa: E402
from pruning_core.bench import load_average  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FORMAT = "headprune.alignment_heads/1"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="whisper-base")
    ap.add_argument("--texts", type=int, default=24, help="probe sentences")
    ap.add_argument("--out", default=str(RESULTS / "alignment_heads.json"))
    args = ap.parse_args()
    loaded = load_model(args.model, attn_implementation="eager")
    listed = listed_alignment_heads(loaded)
    if not listed:
        raise SystemExit(f"{args.model} lists no alignment_heads in its generation config")
    t = time.perf_counter()
    report = compute_roles(loaded, roles=["alignment", "first_token"], n_texts=args.texts, seed=0)
    seconds = time.perf_counter() - t
    grid = report.scores["alignment"]["cross"]
    got = compare_listed(grid, listed)
    contrast = compare_listed(report.scores["first_token"]["cross"], listed)
    heads = int(np.isfinite(grid).sum())
    doc = {"format": FORMAT, "model": args.model, "listed": listed, "top": got["top"], "hits": got["hits"],
           "precision": got["precision"], "chance_hits": len(listed) ** 2 / heads,
           "first_token_top": contrast["top"], "first_token_hits": contrast["hits"],
           "scores": np.round(grid, 4).tolist(), "threshold": report.thresholds["alignment"],
           "detected": [list(h[1:]) for h in report.heads("alignment")],
           "probe": report.probes["alignment"], "seconds": round(seconds, 1), "load_after": list(load_average()),
           "torch_threads": torch.get_num_threads(), "cpus": os.cpu_count(), "provenance": report.provenance}
    print(f"{args.model}: top {len(listed)} by audio alignment {got['top']}; listed {listed}; "
          f"{len(got['hits'])}/{len(listed)} hits (precision {got['precision']:.2f}; chance {doc['chance_hits']:.2f} "
          f"hits); first-token top {len(contrast['hits'])}/{len(listed)}; {seconds:.0f} s (load {doc['load_after']})")
    print(f"wrote {write_json(args.out, doc)}")


if __name__ == "__main__":
    main()
