"""Rows for a click in the library (no browser): the layer cache on a language model, on translation and speech,
draft-checked greedy decoding, and the decoding bound against the references."""
from __future__ import annotations

from . import Row, fixed, machine, num, pct, sec, times


def live_clicks(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        layers = ", ".join(map(str, doc["layers"]))
        by_layer = ", ".join(f"{fixed(doc['by_layer'][str(layer)]['median_seconds'], 3)}" for layer in doc["layers"])
        equal = "every figure equal to the pass without the cache" if doc["all_equal"] else "figures differ"
        repeats = 1 + max(c["repeat"] for c in doc["clicks"])
        rows.append(Row(
            f"a one-head click with the layer cache, {doc['model']}, {doc['n_examples']} {doc['task']} "
            f"{doc['unit']}s, {doc['kind']} heads in layers {layers}",
            f"median {sec(doc['median_seconds'], 3)} ({by_layer} s) against {sec(doc['median_plain_seconds'], 3)} "
            f"without the cache in the same run; all heads {sec(doc['full_seconds'])}; {equal}",
            machine(doc, [doc["load_before"], doc["load_end"]]),
            f"python benchmarks/live_clicks.py --model {doc['model']} --repeats {repeats}", (name,)))
    return rows


def seq2seq_live(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        kinds = ", ".join(f"{kind} {fixed(k['loss_seconds']['median'])} / {fixed(k['metric_seconds']['median'])} s"
                          for kind, k in doc["by_kind"].items())
        equal = "every figure equal to the evaluation without the cache" if doc["all_equal_uncached"] else \
            "figures differ from the evaluation without the cache"
        rows.append(Row(
            f"a one-head click with the layer cache, {doc['model']}, {doc['n_examples']} {doc['task']} examples",
            f"loss {sec(doc['loss_seconds']['median'])}, {doc['metric']} {sec(doc['metric_seconds']['median'])}, "
            f"median of {len(doc['clicks'])} clicks in a seeded order (loss / {doc['metric']}: {kinds}); all heads "
            f"{sec(doc['all_heads']['seconds'])}; {equal}",
            machine(doc, [doc["load_before"], doc["load_after"], *(c["load_1min"] for c in doc["clicks"])]),
            f"python benchmarks/seq2seq_live.py --model {doc['model']} --clicks {len(doc['clicks'])}", (name,)))
    return rows


def mt_live(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        live = doc["live"]
        one, seq = live["single"], live["sequence"]
        kinds = ", ".join(f"{k} {sec(v['median_bleu_seconds'])}" for k, v in one["by_kind"].items())
        loads = [live["load_before"][0], live["load_after"][0]]
        loads += [c["load_1min"] for c in one["clicks"] + seq["clicks"]]
        rows.append(Row(
            f"translation live loop, {doc['model']}, {doc['n_examples']} {doc['task']} examples",
            f"a click's new BLEU {sec(one['median_bleu_seconds'])} median wall over {one['n_clicks']} heads removed "
            f"alone ({kinds}), {sec(seq['median_bleu_seconds'])} over {seq['n_clicks']} removed one after another; "
            f"the loss alone {sec(one['median_loss_seconds'])}",
            machine(doc, loads), "python benchmarks/mt_live.py", (name,)))
    return rows


def draft_decoding(docs: dict[str, dict]) -> list[Row]:
    """Per model of each run: draft-checked against plain greedy decoding, CPU seconds per click, how much of the
    drafts was kept, and the exactness sweep (every single-head removal and random masks) where it ran."""
    rows = []
    for name, doc in docs.items():
        models = list(doc["models"])
        sweep = "" if any("sweep" in m for m in doc["models"].values()) else " --no-sweep"
        timed = "" if any("clicks" in m for m in doc["models"].values()) else " --no-clicks"
        command = f"python benchmarks/draft_decoding.py --models {' '.join(models)}{sweep}{timed}"
        for model, entry in doc["models"].items():
            if "clicks" in entry:
                rows.append(_draft_clicks(name, doc, model, entry, command))
            if "sweep" in entry:
                s = entry["sweep"]
                rows.append(Row(
                    f"draft-checked decoding's exactness, {model}: every single-head removal ({s['single_head']}) and "
                    f"{s['random']} random masks (1 to half the heads), {s['examples']} examples each",
                    f"**{s['equal']} of {s['masks']} masks** give plain greedy's tokens on every example"
                    f"{_differences(s)}; near-ties (two best logits within {doc['near_tie_tolerance']}, decided as "
                    f"plain greedy) {s['near_ties']}; {sec(s['seconds'], 0)}",
                    machine(doc, None, f"commit {doc['commit'][:7]}"), command, (name,)))
    return rows


def _differences(sweep: dict) -> str:
    """What the sweep says of the rows that differ, where it explained them."""
    rows = sweep.get("differences")
    if not rows:
        return ""
    alone = sum(d["alone_is_draft"] for d in rows)
    return (f"; the masks that differ do so in {len(rows)} example(s), first at a position whose two best logits are "
            f"at most {max(d['gap'] for d in rows):.1e} apart, and plain greedy decoding each alone gives the "
            f"draft-checked tokens in {alone} of {len(rows)} (plain greedy is not batch-invariant at such a tie)")


def _draft_clicks(name: str, doc: dict, model: str, entry: dict, command: str) -> Row:
    c, t = entry["clicks"], entry["clicks"]["draft_totals"]
    passes = f", {t['passes']} re-aligned passes in all" if "passes" in t else ", one pass"
    steps = [k["draft"]["steps"] for k in c["clicks"]]
    same = "predictions equal" if c["all_same"] else "predictions DIFFER"
    return Row(
        f"draft-checked vs plain greedy decoding, {model}, {entry['examples']} examples, {c['n_clicks']} "
        f"one-head clicks ({', '.join(entry['kinds'])}){passes}",
        f"CPU s median plain {fixed(c['median_plain_cpu_seconds'])}, draft-checked "
        f"{fixed(c['median_draft_cpu_seconds'])}: {times(c['ratio_cpu_seconds'])} (wall "
        f"{fixed(c['median_plain_seconds'], 1)} / {fixed(c['median_draft_seconds'], 1)} s); {same}; near-ties "
        f"{c['near_ties']}; {num(t['accepted'], 0)} of {num(t['drafted'], 0)} drafted tokens kept; "
        f"{t['resumed']} of {num(t['rows'], 0)} rows resumed, {t['steps']} greedy steps ({min(steps)} to "
        f"{max(steps)} a click)",
        machine(doc, [k["load_1min"] for k in c["clicks"]], f"commit {doc['commit'][:7]}"), command, (name,))


SWITCHED = {"lookahead": "lookahead steps (guessed tokens checked several a call, in a batch of at most {on} rows)",
            "window": "the draft check scored a window at a time ({on}, then doubling) against all positions at once"}


def decoding_switch(docs: dict[str, dict]) -> list[Row]:
    """Per run: one of the decoding's savings on and off on the page's clicks, in one process, time to the metric."""
    rows = []
    for name, doc in docs.items():
        clicks_ = doc["clicks"]
        on = [c["on"] for c in clicks_]
        same = "every metric equal" if doc["all_same_metric"] else "metrics DIFFER"
        guessed = (f"; {sum(c['lookahead_calls'] or 0 for c in on)} lookahead calls kept "
                   f"{sum(c['guessed_kept'] or 0 for c in on)} guessed tokens" if doc["switch"] == "lookahead" else "")
        rows.append(Row(
            f"{SWITCHED[doc['switch']].format(on=doc['on'])}, on and off, {doc['model']}, {doc['examples']} examples, "
            f"{len(clicks_)} cumulative page clicks",
            f"click → {'WER' if 'whisper' in doc['model'] else 'BLEU'} median {sec(doc['median_off_s'])} off, "
            f"**{sec(doc['median_on_s'])} on**; all clicks {sec(doc['total_off_s'], 1)} off, "
            f"{sec(doc['total_on_s'], 1)} on{guessed}; {same}",
            machine(doc, [doc["load_before"], doc["load_after"], *(c["load_1min"] for c in clicks_)],
                    f"commit {doc['commit'][:7]}"),
            f"python benchmarks/decoding_switch.py --switch {doc['switch']} --model {doc['model']} "
            f"--toggles {len(clicks_)}", (name,)))
    return rows


def encoder_click_floor(docs: dict[str, dict]) -> list[Row]:
    """Whisper encoder clicks as the server runs them beside the work they cannot avoid, in the same run."""
    rows = []
    for name, doc in docs.items():
        m, clicks_ = doc["median"], doc["clicks"]
        rows.append(Row(
            f"{doc['model']} encoder-head clicks ({len(clicks_)}, every layer), {doc['examples']} utterances: the "
            "click as the server runs it against the work it cannot avoid (the encoder from the clicked layer up, "
            "one teacher-forced decoder pass over the previous transcripts)",
            f"click median {sec(m['click_seconds'])}, unavoidable work {sec(m['floor_seconds'])}: "
            f"**{times(m['ratio'])}** (aim {times(doc['aim_ratio'], 1)}; per click {times(min(r['ratio'] for r in clicks_))} "
            f"to {times(max(r['ratio'] for r in clicks_))})",
            machine(doc, [r["load_1min"] for r in clicks_], f"commit {doc['commit'][:7]}"), doc["command"], (name,)))
    return rows


def decode_bounds(docs: dict[str, dict]) -> list[Row]:
    """Per model: references over greedy decoding's bound per split, and the all-heads outputs against it."""
    rows = []
    for name, doc in docs.items():
        for model, entry in doc["models"].items():
            splits = entry["splits"]
            held = [s for s in ("validation", "test") if s in splits]
            over, most = sum(splits[s]["over"] for s in held), max(splits[s]["most"] for s in held)
            figure = (f"{' and '.join(held)}: {over} of {' + '.join(num(splits[s]['examples'], 0) for s in held)} "
                      f"references over the bound (the longest at {pct(most, 0)} of it)")
            if "train" in splits:
                tr = splits["train"]
                figure += f"; train: {tr['over']} of {num(tr['examples'], 0)} (up to {times(tr['most'], 1)})"
            dec = entry["decoded"]
            figure += (f"; the first {dec['examples']} all-heads outputs: {dec['reached']} reach it (the longest "
                       f"{pct(dec['most'], 0)})")
            rows.append(Row(f"greedy decoding's bound against the references, {model} ({entry['task']}; bound: "
                            f"{dec['decoding']['bound']})", figure, machine(doc, None),
                            f"python benchmarks/decode_bounds.py --decode {dec['examples']}", (name,)))
    return rows
