"""Rows for long context and head roles: a streaming policy's prefill time, StreamingLLM's sink ablation, and the
audio-alignment role against Whisper's listed alignment heads."""
from __future__ import annotations

from . import Row, fixed, machine, num, sec, times


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
            f"**{times(doc['ratio_banded_to_full'], 3)}** (rounds {rounds}); cache "
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
                machine({**doc, "created": prov["created"]}, [c["load_after"][0] for c in conds.values()]),
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
