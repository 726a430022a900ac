"""Rows for long context and head roles: accuracy against the share of heads streaming, a streaming policy's prefill
time, StreamingLLM's sink ablation, and the audio-alignment role against Whisper's listed alignment heads."""
from __future__ import annotations

from . import Row, fixed, machine, num, sec, times


CURVE_POLICIES = ("retrieval", "razor", "budgets", "random")


def _accuracy(row: dict) -> str:
    """'98/100 (0.93-0.99)', with McNemar's p against the full cache where there is one, and RULER's score (the
    share of answers found) where the row has it and it differs from the accuracy (tasks of several answers)."""
    lo, hi = row["wilson_95"]
    p = row.get("vs_full", {}).get("mcnemar_p")
    shown = "" if p is None else ", p < 0.001" if p < 0.001 else f", p {fixed(p, 3)}"
    score = row.get("ruler_score")
    partial = "" if score is None or score == row["accuracy"] else f", RULER score {fixed(100 * score, 1)} %"
    return f"{row['correct']}/{row['examples']} ({fixed(lo)}-{fixed(hi)}{shown}{partial})"


def _ran_on(rows: list[dict]) -> dict | None:
    """The machine and time of rows that record their own (a file's rows can come from several machines): the CPU
    they share and the latest row's time; None when some row records neither (the file's own then)."""
    if not rows or any("machine" not in r or "created" not in r for r in rows):
        return None
    names = {r["machine"].get("cpu") for r in rows}
    if len(names) > 1:
        return {"machine": " and ".join(sorted(n or "?" for n in names)), "cores": rows[0]["machine"].get("cores"),
                "created": max(r["created"] for r in rows)}
    return {"machine": rows[0]["machine"], "created": max(r["created"] for r in rows)}


def long_context_curves(docs: dict[str, dict]) -> list[Row]:
    """One row per model, task, length and share streaming: every policy's accuracy beside the full cache's, the
    memory they all keep, and whether the retrieval-chosen half keeps 95 % of the full cache's accuracy."""
    out = []
    for name, doc in docs.items():
        groups: dict[tuple, dict] = {}
        for key, row in doc["rows"].items():
            model, task, length, policy, fraction, seed = key.split("|")
            groups.setdefault((model, task, int(length)), {})[(policy, fraction, seed)] = row
        for (model, task, length), rows in groups.items():
            full = rows.get(("full", "0", ""))
            every = rows.get(("streaming", "1", ""))
            for fraction in sorted({f for p, f, _ in rows if p in CURVE_POLICIES}, key=float):
                parts = [f"full {_accuracy(full)}"] if full else []
                for policy in CURVE_POLICIES:
                    found = [(seed, r) for (p, f, seed), r in sorted(rows.items()) if p == policy and f == fraction]
                    parts += [f"{policy}{f' seed {seed}' if seed else ''} {_accuracy(r)}" for seed, r in found]
                if every:
                    parts.append(f"every head streaming {_accuracy(every)}")
                some = next(r for (p, f, _), r in rows.items() if f == fraction and p in CURVE_POLICIES)
                kept = rows.get(("retrieval", fraction, ""), {}).get("vs_full", {}).get("share_of_full")
                verdict = "" if kept is None else (f"; retrieval keeps {fixed(100 * kept, 1)} % of full "
                                                  f"({'≥' if kept >= 0.95 else '<'} 95 %)")
                settings = doc["models"][model]["provenance"]["settings"]
                shown = [r for (_, f, _), r in rows.items() if f in (fraction, "0", "1")]
                counts = sorted({r["torch_threads"] for r in shown if "torch_threads" in r})
                threads = {"torch_threads": counts[0] if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"} \
                    if counts else {}
                ran = _ran_on(shown) or {"machine": doc["machine"],
                                         "created": doc["models"][model]["provenance"]["created"]}
                out.append(Row(
                    f"{task} at {num(length, 0)} tokens, {model}: {fixed(100 * float(fraction), 0)} % of key/value heads "
                    f"streaming (sink {some['sink']}, window {some['window']}), exact-match accuracy, 95 % Wilson "
                    f"interval, McNemar p against full" + (", RULER's score (the share of answers found)" if any(
                        r.get("ruler_score") not in (None, r["accuracy"]) for r in shown) else ""),
                    "; ".join(parts) + f"; KV {fixed(some['kv_mib'], 1)} of {fixed(some['full_kv_mib'], 1)} MiB, "
                    f"compression {fixed(some['compression_ratio'])}, footprint {fixed(some['footprint_ratio'])}{verdict}",
                    machine({**doc, **threads, **ran}, None, settings.get("attention", "eager")),
                    f"python benchmarks/long_context_curves.py --models {model} --tasks {task} --lengths {length} "
                    f"--fractions {fraction} --limit {settings['limit']}", (name,)))
    return out


def kv_prefill(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        pol, runs, med = doc["policy"], doc["runs"], doc["median_seconds"]
        rounds = ", ".join(f"{fixed(b['seconds'] / f['seconds'], 2)}" for f, b in zip(runs["full"], runs["banded"]))
        loads = [r[k] for rs in runs.values() for r in rs for k in ("load_before", "load_after")]
        prov = doc["provenance"]
        rows.append(Row(
            f"prefill at {num(doc['context'], 0)} tokens, {pol['streaming_kv_heads']} of {pol['kv_heads']} key/value "
            f"heads streaming (S {pol['sink']}, W {pol['window']}), {doc['model']}, {doc['attn_implementation']}",
            f"median {sec(med['full'], 1)} full, {sec(med['banded'], 1)} streaming: "
            f"**{times(doc['ratio_banded_to_full'], 3)}** (rounds {rounds})"
            + (f"; every head streaming {sec(med['every'], 1)}, {times(doc['ratio_every_to_full'], 3)} (the floor)"
               if "every" in med else "") + "; cache "
            f"{fixed(doc['full_kv_bytes'] / 2**20)} MiB full, {fixed(doc['kv_bytes'] / 2**20)} MiB streaming",
            machine({**doc, "cpus": prov["cpus"], "created": prov["started"]}, loads),
            prov["command"], (name,)))
    return rows


def sink_ablation(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        for model, run in doc["runs"].items():
            conds = run["rows"]
            full = conds.get("full")
            sinks = [c for c in conds.values() if c["sink"] is not None]
            tokens = sinks[0]["tokens"] if sinks else full["tokens"]
            prov = run["provenance"]
            rows.append(Row(
                f"attention-sink ablation ({doc['streaming_llm']['source']}), {model}: every key/value head "
                f"streaming, window {num(doc['window'], 0)}, perplexity of {doc['task']} ({num(tokens, 0)} tokens, "
                f"context {num(doc['context'], 0)} every {num(prov['settings']['stride'], 0)})",
                (f"full cache {fixed(full['perplexity'], 2)}; " if full else "") + "sinks "
                + " / ".join(str(c["sink"]) for c in sinks) + ": "
                + " / ".join(f"{fixed(c['perplexity'], 2)}" for c in sinks) + " (intervals in the JSON)",
                machine({**doc, "created": prov["created"]}, [c["load_after"][0] for c in conds.values()],
                        prov["settings"].get("attention", "eager")),
                f"python benchmarks/sink_ablation.py --models {model}", (name,)))
    return rows


def alignment_heads(docs: dict[str, dict]) -> list[Row]:
    """The role's top heads against the model's listed ones: hits, precision, chance, and where the missed rank."""
    rows = []
    for name, doc in docs.items():
        ranked = sorted(((s, (layer, head)) for layer, row in enumerate(doc["scores"]) for head, s in enumerate(row)),
                        reverse=True)
        rank = {lh: i + 1 for i, (_, lh) in enumerate(ranked)}
        hits = {tuple(h) for h in doc["hits"]}
        missed = ", ".join(f"{layer}.{head} (rank {rank[(layer, head)]})" for layer, head in
                           sorted(map(tuple, doc["listed"]), key=rank.get) if (layer, head) not in hits)
        top = ", ".join(f"{layer}.{head}" for layer, head in doc["top"])
        rows.append(Row(
            f"{doc['model']}'s listed alignment heads found by the audio-alignment role "
            f"({doc['provenance']['n_examples']} espeak-ng sentences)",
            f"top {len(doc['top'])} by the role: {top}; **{len(doc['hits'])} of the {len(doc['listed'])} listed** "
            f"(precision {fixed(doc['precision'], 3)}; {len(doc['top'])} random heads hold "
            f"{fixed(doc['chance_hits'], 1)} on average; the first-token role's top {len(doc['first_token_top'])} "
            f"hold {len(doc['first_token_hits'])}); missed: {missed} of {len(ranked)}; {sec(doc['seconds'], 0)}",
            machine({**doc, "created": doc["provenance"]["created"]}, doc["load_after"][:1]),
            "python benchmarks/alignment_heads.py", (name,)))
    return rows


def alignment_variants(docs: dict[str, dict]) -> list[Row]:
    """How the alignment role's score was chosen: each variant's hits on the two halves of the sentences."""
    rows = []
    for name, doc in docs.items():
        (a, b), (c, d) = doc["halves"]
        counts = "; ".join(f"{v} {r['choose_half']['hits']}/{r['check_half']['hits']}"
                           for v, r in doc["variants"].items())
        rows.append(Row(
            f"{doc['model']}: the alignment role's score chosen among {len(doc['variants'])} (hits of the "
            f"{len(doc['listed'])} listed on sentences {a}-{b} / {c}-{d})",
            f"chosen **{doc['chosen']}**; {counts}",
            machine({**doc, "created": doc["provenance"]["created"]}, doc["load_after"][:1]),
            "python benchmarks/alignment_variants.py", (name,)))
    return rows
