"""Rows for a pruned model's speed and accuracy: the default's accuracy, physical pruning against its FLOP ceiling
(``bench_pruning.py``), pruning curves, Bergamot's generation speed, bf16 autocast."""
from __future__ import annotations

from . import Row, fixed, machine, num, pct, sec, sig, times

CURVE_POINTS = (0.3, 0.5, 0.7)          # the shares of heads removed a curve's row quotes (the nearest points)


def accuracy(docs: dict[str, dict]) -> list[Row]:
    """The default's accuracy with every head, from the unpruned figures of ``compress_selection.py``."""
    rows = []
    for name, doc in docs.items():
        prov, base = doc["provenance"], doc["summary"]["unpruned"]
        rows.append(Row(
            f"{prov['model']}'s accuracy with every head, {prov['task']} (weights {prov['weights_sha256'][:7]})",
            f"test {fixed(base['test']['metric'], 4)}, validation {fixed(base['validation']['metric'], 4)}",
            machine(doc, None),
            f"headprune evaluate {prov['model']} --task {prov['task']} --split test", (name,)))
    return rows


def bench_pruning(docs: dict[str, dict]) -> list[Row]:
    """Per file: the speed-up of the physically pruned copy per batch size against the ceiling; dense latency and
    masked/dense; once per model and length: the FLOP ceiling and the parameters before and after."""
    rows, ceilings = [], set()
    for name, doc in docs.items():
        m, ceil = doc["machine"], doc["ceiling"]
        where = machine(doc, [m["load_before"][0], m["load_after"][0]])
        command = f"python benchmarks/bench_pruning.py --device {doc['device']}"
        head = f"{doc['model']} ({doc['arch']}), T={doc['seq_len']}, {doc['heads_kept']} of {doc['heads_total']} heads"
        if (doc["model"], doc["seq_len"], doc["heads_kept"]) not in ceilings:
            ceilings.add((doc["model"], doc["seq_len"], doc["heads_kept"]))
            params = {r["variant"]: r["parameters"] for r in doc["rows"]}
            rows.append(Row(f"FLOP ceiling and parameters, {head}",
                            f"{pct(ceil['removed_fraction'])} of multiply-adds removed: ceiling "
                            f"{times(ceil['speedup'], 3)}; parameters {num(params['dense'], 0)} -> "
                            f"{num(params['pruned'], 0)}", where, command, (name,)))
        speedups = ", ".join(f"batch {s['batch_size']}: {times(s['speedup'], 3)} ({pct(s['fraction_of_ceiling'])})"
                             for s in doc["speedups"])
        rows.append(Row(f"physically pruned speed-up, share of the ceiling, {head}, {doc['attn_implementation']}",
                        speedups, where, command, (name,)))
        dense = {r["batch_size"]: r["median_s"] for r in doc["rows"] if r["variant"] == "dense"}
        masked = ", ".join(times(s["masked_over_dense"]) for s in doc["speedups"])
        rows.append(Row(f"dense latency and masked / dense, {head}, {doc['attn_implementation']}",
                        " / ".join(f"{1000 * v:.{1 if v < 0.1 else 0}f} ms" for v in dense.values())
                        + f" at batch {' / '.join(map(str, dense))}; masked / dense {masked}: masking removes "
                        "no computation", where, command, (name,)))
    return rows


def bench_attn(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        ratios = " / ".join(times(r["eager_over_sdpa_dense"]) for r in doc["rows"])
        pruned = " / ".join(times(r["eager_over_sdpa_pruned"]) for r in doc["rows"])
        batches = " / ".join(str(r["batch_size"]) for r in doc["rows"])
        rows.append(Row(f"eager over sdpa attention, {doc['provenance']['model']}, batch {batches}",
                        f"dense {ratios}, pruned {pruned}",
                        machine(doc, doc["load_average"][:1]),
                        "python benchmarks/bench_pruning.py --device cpu", (name,)))
    return rows


def curve(docs: dict[str, dict]) -> list[Row]:
    """A pruning curve: the metric at the points nearest ``CURVE_POINTS``, the unpruned one with its interval."""
    rows = []
    for name, doc in docs.items():
        prov, points = doc["provenance"], doc["points"]
        set_ = prov["settings"]
        quoted = [min(points, key=lambda p: abs(p["fraction_removed"] - f)) for f in CURVE_POINTS]
        spread = (lambda p: f" ± {fixed(100 * p['sd'], 1)}") if len(doc["seeds"]) > 1 else (lambda p: "")
        first = points[0]
        method = doc["method"] + (" re-scored each step" if doc["rescore"] else "")
        seeds = f", {len(doc['seeds'])} seeds" if len(doc["seeds"]) > 1 else ""
        scored = f" on {set_['score_n']} {set_['score_split']} examples" if set_.get("score_n") else ""
        figure = ", ".join(f"{fixed(100 * p['metric'], 1)}{spread(p)} % at {pct(p['fraction_removed'])}"
                           for p in quoted)
        figure += f" removed (unpruned {pct(first['metric'])}, interval {pct(first['low'])} to {pct(first['high'])})"
        command = (f"headprune curve {prov['model']} --task {prov['task']} --split {prov['split']} "
                   f"--method {doc['method']}" + (" --rescore" if doc["rescore"] else ""))
        rows.append(Row(f"pruning curve, {prov['model']}, {doc['metric_name']} on {num(doc['n_examples'], 0)} "
                        f"{prov['split']} examples, {method}{scored}{seeds}", figure,
                        machine(doc, []), command, (name,)))
    return rows


def mt_generation(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        masks = doc["masks"]
        dense = [m["tokens_per_s"]["dense"] for m in masks.values()]
        gains = ", ".join(f"{key.removesuffix('_half')} {times(m['speedup_of_medians'], 3)} (ceiling "
                          f"{times(m['flop_ceiling'], 3)})" for key, m in masks.items())
        loads = [doc["load_before"][0], doc["load_after"][0], *(m["load_1min"] for m in masks.values())]
        rows.append(Row(f"generation speed, {doc['model']}, {doc['n_examples']} {doc['task']} examples, batches of "
                        f"{doc['batch_size']}, the least important half of the heads of a kind removed physically",
                        f"dense {num(min(dense), 0)} to {num(max(dense), 0)} tokens/s; pruned: {gains}",
                        machine(doc, loads),
                        "python benchmarks/mt_generation.py", (name,)))
    return rows


def bf16_autocast(docs: dict[str, dict]) -> list[Row]:
    """Per model: bf16 autocast against float32 in the same run, the speed-up and how far the figures move."""
    rows = []
    for name, doc in docs.items():
        for r in doc["rows"]:
            f32, b16 = r["float32"], r["bf16_autocast"]
            encoder = (f" (encoder alone {times(r['encoder_8x30s']['speedup'])})" if "encoder_8x30s" in r else "")
            rows.append(Row(
                f"bf16 autocast against float32, one evaluation, {r['model']}, {r['examples']} {r['task']} examples",
                f"{times(r['speedup'])} faster{encoder}; {f32['metric_name']} {sig(f32['metric'])} -> "
                f"{sig(b16['metric'])}, loss {'+' if r['loss_change'] >= 0 else ''}{fixed(r['loss_change'], 4)}; "
                f"float32 {sec(f32['median_s'], 3)}",
                machine(doc, [r["load_before"], r["load_after"]]),
                "python benchmarks/bf16_autocast.py", (name,)))
    return rows

