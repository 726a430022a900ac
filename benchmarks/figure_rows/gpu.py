"""Rows for the GPU suite (``gpu_suite.py``), by section: the matmul rate, head scoring against the bertology loop,
the pruned forward pass and its FLOP ceilings, masked against pruned, a click's evaluation, a device map and
``torchrun``. A section that failed goes to the Archive, naming the file that ran it again (its ``superseded_by``)."""
from __future__ import annotations

from . import Row, fixed, num, pct, times, when

Lines = list[tuple[str, str]]           # (what, figure) per row


def _matmul(s: dict, doc: dict) -> Lines:
    peak = doc["peak_bf16"]["datasheet_flops"]
    return [(f"{s['dtype']} {s['n']}³ matrix product, and the whole suite",
             f"{fixed(s['flops'] / 1e12, 0)} TFLOP/s ({pct(s['flops'] / peak, 0)} of the {fixed(peak / 1e12, 0)} "
             f"datasheet peak); the suite {fixed(doc['seconds'], 0)} s, peak GPU memory "
             f"{fixed(doc['peak_memory_bytes'] / 1e9, 1)} GB")]


def _scoring(s: dict, doc: dict) -> Lines:
    out = []
    for model, m in s["models"].items():
        rates = {dt: {k: num(v["examples_per_s"], 0) for k, v in d["methods"].items()} for dt, d in m["dtypes"].items()}
        out.append((f"gradient I_h, {s['examples']} x {s['seq_len']} tokens, {model}: examples/s, headprune vs the "
                    "bertology head_mask loop with weight gradients / frozen",
                    ", ".join(f"{dt} {r['headprune']} vs {r['bertology']} / {r['bertology_frozen']}"
                              for dt, r in rates.items())))
    return out


def _latency(s: dict, doc: dict) -> Lines:
    """The speed-up at each model's largest batch and length, at batch 1, and the ceilings per length."""
    largest, single = [], []
    for model, m in s["models"].items():
        top = max(m["points"], key=lambda p: (p["batch_size"] * p["seq_len"], p["seq_len"]))
        largest.append(f"{model} {times(top['speedup'])} (ceiling {times(top['ceiling'])})")
        single += [p for p in m["points"] if p["batch_size"] == 1]
    ms = [1000 * p["dense"]["median_s"] for p in single]
    gains = [p["speedup"] for p in single]
    lengths = sorted({p["seq_len"] for m in s["models"].values() for p in m["points"]})
    ceilings = ", ".join(f"{model} " + " / ".join(
        times(next(p["ceiling"] for p in m["points"] if p["seq_len"] == t), 3) for t in lengths)
        for model, m in s["models"].items())
    return [(f"half of every layer's heads removed physically, forward pass, {s['dtype']}, {s['attn']}",
             f"batch {top['batch_size']} x {top['seq_len']}: " + ", ".join(largest)
             + f"; batch 1: {times(min(gains))} to {times(max(gains))} (dense {fixed(min(ms), 1)} to "
             f"{fixed(max(ms), 1)} ms)"),
            (f"FLOP ceiling of that half at T = {' / '.join(map(str, lengths))}", ceilings)]


def _precision(s: dict, doc: dict) -> Lines:
    rel = max(m["masked_vs_pruned"]["float32"]["relative"] for m in s["models"].values())
    rho = min(min(m["spearman_raw"], m["spearman_normalized"]) for m in s["models"].values())
    return [("masked against pruned, and the I_h ranking in bf16 against float32, " + ", ".join(s["models"]),
             f"masked equals pruned within {rel:.1e} of the largest logit (float32); lowest Spearman {fixed(rho, 4)}")]


def _evaluate(s: dict, doc: dict) -> Lines:
    return [(f"a click's evaluation (warm, masked), {s['examples']} examples, {s['dtype']}",
             ", ".join(f"{model} {fixed(1000 * m['warm']['masked']['median_s'], 1)} ms"
                       for model, m in s["models"].items()))]


def _device_map(s: dict, doc: dict) -> Lines:
    return [(f"scores with a device map over {' and '.join(sorted(set(s['device_map'].values())))}",
             f"as on one device: largest relative difference {s['max_relative_difference']}")]


def _torchrun(s: dict, doc: dict) -> Lines:
    par = s["parallel"]
    return [(f"scores under torchrun ({par['backend']}, world size {par['world_size']})",
             f"as in one process: largest relative difference {s['max_relative_difference']}; launch to exit "
             f"{fixed(s['torchrun_s'], 0)} s against {fixed(s['single_s'], 1)} s in one process")]


SECTIONS = {"matmul": _matmul, "scoring": _scoring, "latency": _latency, "precision": _precision,
            "evaluate": _evaluate, "device_map": _device_map, "torchrun": _torchrun}


def gpu_suite(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        env = doc["environment"]
        where = f"{when(doc)}, {env['name']}, torch {env['torch']}, CUDA {env['cuda']}, random weights at real shapes"
        command = doc.get("command") or f"python3 benchmarks/gpu_suite.py --device {env['device']}"
        for key, section in doc["sections"].items():
            if section.get("status") != "ok":
                newer = section.get("superseded_by")
                why = f"the section failed ({section['error']['type']})" + (f"; run again: `{newer}`" if newer else "")
                rows.append(Row(f"GPU suite: {key}", "failed", where, command, (name,), stale=why))
                continue
            rows += [Row(f"GPU: {what}", figure, where, command, (name,))
                     for what, figure in SECTIONS[key](section, doc)]
    return rows
