"""How the audio-alignment role's score was chosen (issue 47, goal 6): thirteen ways to score "this cross-attention
head follows the speech", each compared with Whisper-base's listed ``alignment_heads`` on two disjoint halves of the
probe sentences (choose on the first, check on the second).

    .venv/bin/python benchmarks/alignment_variants.py            # 96 sentences: ~4 min on 2 cores

Every variant reads the same attention (the ``text`` probe: espeak-ng speech, transcripts teacher-forced) and the
same character-proportional stretches; ``mass_T`` and ``peak_T`` (attention mass on, or the share of peaks on, the
token's stretch widened by T of the speech each side) and the others are defined in docs/METHODS.md ("Speech
alignment heads"). Writes ``benchmarks/results/alignment_variants.json``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pruning_core.analysis.roles.alignment import compare_listed, listed_alignment_heads  # noqa: E402
from pruning_core.analysis.roles.compute import _task, probe_texts  # noqa: E402
from pruning_core.analysis.roles.probes import text_sequences  # noqa: E402
from pruning_core.bench import load_average  # noqa: E402
from pruning_core.core.io.storage import write_json  # noqa: E402
from pruning_core.evaluation.results import provenance  # noqa: E402
from pruning_core.modeling.sources.loading import load_model  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


def _stretches(marks: dict, a: np.ndarray):
    """(attention of the predicting queries [heads, tokens, keys], stretch edges [tokens + 1], speech start, end)."""
    first, end = marks["speech"]
    chars = np.asarray(marks["chars"], dtype=float)
    edges = first + (end - first) * np.concatenate([[0.0], np.cumsum(chars)]) / chars.sum()
    rows = marks["prompt"] - 1 + np.arange(len(chars))
    keep = (rows >= 0) & (rows < a.shape[1])
    return a[:, rows[keep]], np.concatenate([edges[:-1][keep], edges[1:][keep][-1:]]) if keep.any() else edges[:0], \
        first, end


def _band(edges, first, end, keys, widen):
    slack = widen * (end - first)
    frame = np.arange(keys)[None, :]
    return (frame >= np.floor(edges[:-1, None] - slack)) & (frame < np.ceil(edges[1:, None] + slack))


def mass(widen):
    def score(att, edges, first, end):
        return (att * _band(edges, first, end, att.shape[2], widen)[None]).sum(2).mean(1)
    return score


def peak(widen):
    def score(att, edges, first, end):
        band = _band(edges, first, end, att.shape[2], widen)
        peaks = att.argmax(2)
        return np.take_along_axis(np.broadcast_to(band, (att.shape[0], *band.shape)), peaks[..., None], 2)[..., 0].mean(1)
    return score


def lift(widen):
    def score(att, edges, first, end):
        speech = att[:, :, int(first):int(np.ceil(end))].sum(2).mean(1)
        return mass(widen)(att, edges, first, end) / np.maximum(speech, 1e-6)
    return score


def _centres(edges):
    return (edges[:-1] + edges[1:]) / 2


def _centre_of_mass(att):
    return (att * np.arange(att.shape[2])).sum(2) / att.sum(2)


def _corr(x, y):
    return float(np.corrcoef(x, y)[0, 1]) if x.std() > 0 and y.std() > 0 else 0.0


def _ranks(x):
    return np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(float)


VARIANTS = {
    **{f"mass_{w:g}": mass(w) for w in (0.0, 0.05, 0.1, 0.2)},
    **{f"peak_{w:g}": peak(w) for w in (0.0, 0.05, 0.1)},
    **{f"lift_{w:g}": lift(w) for w in (0.05, 0.1)},
    "centre_distance": lambda att, e, f, end: 1 - np.abs(_centre_of_mass(att) - _centres(e)).mean(1) / (end - f),
    "peak_distance": lambda att, e, f, end: 1 - np.abs(att.argmax(2) - _centres(e)).mean(1) / (end - f),
    "centre_corr": lambda att, e, f, end: np.array([_corr(c, _centres(e)) for c in _centre_of_mass(att)]),
    "peak_rank_corr": lambda att, e, f, end: np.array([_corr(_ranks(p), _ranks(_centres(e))) for p in att.argmax(2)]),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="whisper-base")
    ap.add_argument("--texts", type=int, default=96, help="probe sentences, split in two halves")
    ap.add_argument("--out", default=str(RESULTS / "alignment_variants.json"))
    args = ap.parse_args()
    loaded = load_model(args.model, attn_implementation="eager")
    listed = listed_alignment_heads(loaded)
    task = _task(None)
    split, texts = probe_texts(task, args.texts)
    rows = loaded.layout.kinds["cross"]
    half = len(texts) // 2
    sums = {(name, h): np.zeros((len(rows), max(rows))) for name in VARIANTS for h in (0, 1)}
    counts = {h: np.zeros(len(rows)) for h in (0, 1)}
    for i, seqs in enumerate(text_sequences(loaded, texts)):
        seq, h = seqs["cross"], int(i >= half)
        for layer, a in enumerate(seq.maps):
            att, edges, first, end = _stretches(seq.marks, a)
            if att.shape[1] < 3:
                continue
            counts[h][layer] += 1
            for name, score in VARIANTS.items():
                sums[(name, h)][layer, :rows[layer]] += score(att, edges, first, end)
    out = {}
    for name in VARIANTS:
        halves = []
        for h in (0, 1):
            grid = sums[(name, h)] / np.maximum(counts[h], 1)[:, None]
            got = compare_listed(grid, listed)
            order = np.argsort(-grid.ravel(), kind="stable").tolist()
            halves.append({"hits": len(got["hits"]), "top": got["top"],
                           "listed_ranks": sorted(order.index(layer * grid.shape[1] + head) + 1 for layer, head in listed)})
        out[name] = {"choose_half": halves[0], "check_half": halves[1]}
        print(f"{name:16s} hits {halves[0]['hits']}/8 (sentences 1-{half}), {halves[1]['hits']}/8 "
              f"(sentences {half + 1}-{len(texts)}); listed heads' ranks {halves[1]['listed_ranks']}")
    doc = {"format": "headprune.alignment_variants/1", "model": args.model, "listed": listed,
           "sentences": len(texts), "halves": [[1, half], [half + 1, len(texts)]], "variants": out,
           "chosen": "peak_0", "load_after": list(load_average()),
           "provenance": provenance(loaded, task=task.name, split=split, n_examples=len(texts),
                                    method="alignment variants", settings=vars(args))}
    print(f"wrote {write_json(args.out, doc)}")


if __name__ == "__main__":
    main()
