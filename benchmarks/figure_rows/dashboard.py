"""Rows for a click on the dashboard in Chromium (``dashboard_timings.py``): one session's clicks, a class clicking
at once against a lone session in the same run, clicks at random moments; and the Head map's scoring memory."""
from __future__ import annotations

from . import Row, fixed, machine, median_range, num, pct, sec, times


def _loads(doc: dict) -> list[float]:
    """Every 1-minute load average a dashboard run recorded: before it, beside its pass, at each click and class."""
    out = []
    for run in doc.get("runs") or []:
        out += [run.get("load_average_1min_before"), run.get("one_forward_pass", {}).get("load_average_1min")]
        out += [t.get("load_average_1min") for t in run.get("toggles") or []]
    for group in [*(doc.get("class") or []), doc.get("class_random_moments") or {}]:
        out += list((group.get("load_average_1min") or {}).values())
    return out


def _subject(doc: dict) -> str:
    return f"{doc['model']}, {doc['provenance']['settings']['limit']} examples"


def _window(doc: dict) -> str:
    return "Chromium " + doc["provenance"]["settings"]["window"].split(" ")[0]


def _session(run: dict) -> str:
    """One session clicking: click -> metric (and loss, where it comes first), by attention kind, the latency's
    estimate and measurement (the first click's apart), and the server's CPU against one forward pass over the same
    examples."""
    metric, loss, kinds = run["click_to_metric_s"], run.get("click_to_loss_s"), run.get("by_kind") or {}
    if not loss or loss == metric:
        text = f"click -> metric {median_range(metric)}"
    else:
        text = f"click -> loss {median_range(loss)}, metric {median_range(metric)}"
    if len(kinds) > 1:
        text += " (loss / metric: " + ", ".join(
            f"{k} {fixed(v['click_to_loss_s']['median'])} / {fixed(v['click_to_metric_s']['median'])}"
            for k, v in kinds.items()) + ")"
    text += f"; latency drawn {sec(run['click_to_latency_s']['median'])}"
    if "click_to_latency_measured_s" in run:
        text += f", measured {sec(run['click_to_latency_measured_s']['median'], 1)}"
        first = (run.get("toggles") or [{}])[0].get("to_latency_measured_s")
        if first is not None:                   # the page's first timing of this model: the calibration's turn
            text += f" (the first click's {sec(first, 1)})"
    one, sent = run["one_forward_pass"]["wall_s"]["median"], run["server_cpu_to_metric_sent_s"]["median"]
    share = times(run["cpu_to_metric_sent_over_one_forward_pass"])
    return text + f"; server CPU to the metric {sec(sent)}, {share} a forward pass ({sec(one)} wall)"


def _class(doc: dict, over: dict) -> str:
    """A class against a lone session of the same run: medians, the ratio, correctness, CPU and memory."""
    n, nice = over["sessions"], over["browsers_niceness"]
    pooled = {(p["sessions"], p.get("browsers_niceness")): p for p in doc["class_pooled"]}
    group, lone = pooled[(n, nice)], pooled[(1, nice)]
    rounds = [c for c in doc["class"] if c["sessions"] == n and c.get("browsers_niceness") == nice]
    alone = [c for c in doc["class"] if c["sessions"] == 1 and c.get("browsers_niceness") == nice]
    server = sum(c["cpu_s_to_last_metric"]["server"] for c in rounds) / (n * len(rounds))
    lone_cpu = sum(c["cpu_s_to_last_metric"]["server"] for c in alone) / len(alone)
    browsers = sum(c["cpu_s_to_last_metric"]["browsers"] for c in rounds) / len(rounds)
    medians = "" if len(rounds) == 1 else " (rounds " + ", ".join(map(fixed, group["round_medians_s"])) + ")"
    lost = f", {group['clicks_lost']} lost" if "clicks_lost" in group else ""
    return (f"median {median_range(group['to_metric_s'])} over {group['to_metric_s']['n']}{medians}, lone "
            f"{median_range(lone['to_metric_s'], 3)}: **{times(over['ratio'])}**; "
            f"{'all correct' if group['all_correct'] else 'metrics WRONG'}{lost}; server {sec(server)} CPU a "
            f"click (alone {fixed(lone_cpu)}), browsers {sec(browsers, 1)} a round; peak "
            f"{num(group['server_peak_mib'], 0)} MiB")


def dashboard_timings(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        where = machine(doc, _loads(doc), _window(doc))
        command = doc["command"]
        for run in doc.get("runs") or []:
            clicks = "layer-0 heads" if "layer 0" in doc["provenance"]["settings"].get("clicks", "") else \
                "one head a layer" + (" and kind" if len(run.get("by_kind") or {}) > 1 else "")
            condition = "" if run["condition"].startswith("as found") else f", {run['condition']}"
            rows.append(Row(f"dashboard, one session's clicks, {_subject(doc)}, {clicks}{condition}",
                            _session(run), where, command, (name,)))
        for over in doc.get("class_over_single") or []:
            rows.append(Row(f"dashboard, a class of {over['sessions']} at once vs one session, {_subject(doc)}, "
                            f"browsers nice {over['browsers_niceness']}",
                            _class(doc, over), where, command, (name,)))
        moments = doc.get("class_random_moments")
        if moments:
            wrong = moments["heads_wrongly_removed"]
            rows.append(Row(
                f"dashboard, {moments['sessions']} sessions clicking {moments['clicks_per_session']} heads each at "
                f"random moments over {sec(moments['span_s'], 0)}, {_subject(doc)}",
                f"{moments['clicks_lost']} of {moments['clicks']} clicks lost, {wrong} heads wrongly removed, "
                f"{'every final metric correct' if moments['all_correct'] else 'final metrics WRONG'}",
                where, command, (name,)))
    return rows


def headmap_memory(docs: dict[str, dict]) -> list[Row]:
    rows = []
    for name, doc in docs.items():
        rows.append(Row(
            f"Head map scoring started by its button, {doc['model']} on {doc['task']}",
            f"{sec(doc['scoring_seconds'], 1)} from the click to the coloured map (the button: \"{doc['button']}\"); "
            f"server peak {num(doc['vm_hwm_mib'], 0)} MiB (VmHWM) within the dashboard's "
            f"{num(doc['memory_budget_mib'], 0)} MiB budget",
            machine(doc, list(doc["load_average_1min"].values())),
            doc["command"].strip(), (name,)))
    return rows


def latency_estimate(docs: dict[str, dict]) -> list[Row]:
    """Per model: how far the Head map's latency estimate falls from the measurement, and the longest a click can
    wait for the calibration (the stretch between two of its pauses)."""
    rows = []
    for name, doc in docs.items():
        masks = doc["masks"]
        loads = [doc["load_before"][0], doc["load_after"][0], *[m["load"][0] for m in masks]]
        rows.append(Row(
            f"the Head map's latency estimate against the measurement, {doc['model']}: {len(masks)} masks (one head; "
            f"25, 50, 75 % of the heads), batch {doc['batch_size']} x {doc['seq_len']} tokens",
            f"median |error| **{pct(doc['median_abs_relative_error'])}**, largest {pct(doc['max_abs_relative_error'])}; "
            f"calibration {sec(doc['calibration_s'], 1)}, a click waits at most "
            f"{sec(doc['longest_between_pauses_s'], 3)} for it (median {sec(doc['median_between_pauses_s'], 3)} "
            f"between its {doc['pauses']} pauses)",
            machine(doc, loads),
            f"python benchmarks/latency_estimate.py --model {doc['model']}", (name,)))
    return rows


def first_call(docs: dict[str, dict]) -> list[Row]:
    """Per model: a pruned copy's first call at the latency probe's shape against its next ones (why the latency
    timing has no warm-up round)."""
    rows = []
    for name, doc in docs.items():
        for model, m in doc["models"].items():
            batch, seq_len = m["probe"]
            rows.append(Row(
                f"a pruned copy's first call against its next three, {model}, the latency probe "
                f"({batch} x {seq_len} tokens), {len(m['copies'])} copies of 3 random heads removed",
                f"first / median of the next: median {fixed(m['median_ratio'], 3)}, at most {fixed(m['max_ratio'], 3)}",
                machine(doc, [doc["load_before"], doc["load_after"], m["load_1min"]], f"commit {doc['commit'][:7]}"),
                f"python benchmarks/first_call.py --copies {len(m['copies'])}", (name,)))
    return rows


def two_at_once(docs: dict[str, dict]) -> list[Row]:
    """Two sessions' clicks evaluated at once (a thread and a core each) against one after the other (both cores
    each): whether the server's queue should run two."""
    rows = []
    for name, doc in docs.items():
        first, second = doc["met_first"], doc["met_second"]
        rows.append(Row(
            f"two clicks evaluated at once (a thread each, one core each) vs one after the other (two threads), "
            f"{doc['model']}, {doc['examples']} examples, {len(doc['pairs'])} pairs of one-head masks",
            f"a pair: one after the other {sec(doc['serial_median_s'])}, at once {sec(doc['parallel_median_s'])}: "
            f"**{fixed(doc['serial_over_parallel'], 2)}x**; masks met first {sec(first['serial'])} / "
            f"{sec(first['parallel'])}, met again {sec(second['serial'])} / {sec(second['parallel'])}; every metric "
            "equal both ways",
            machine(doc, list(doc["load_1min"].values())), doc["command"], (name,)))
    return rows


def click_work(docs: dict[str, dict]) -> list[Row]:
    """Per model: a page run's clicks against the same masks evaluated in the library right after (the model work a
    click needs), as the server's wall and CPU time to sending the metric and as the page's click -> metric."""
    rows = []
    for name, doc in docs.items():
        wall, cpu_, page = doc["server_over_work"], doc["server_cpu_over_work_cpu"], doc["page_over_work"]
        kinds = sorted({c["kind"] for c in doc["clicks"]})
        rows.append(Row(
            f"a page click against the model work it needs, {doc['model']}, {doc['examples']} examples, the "
            f"{len(doc['clicks'])} clicks of `{doc['page_file']}` replayed in the library (`app.model.cache.evaluate`)"
            + (f", {len(kinds)} attention kinds" if len(kinds) > 1 else ""),
            f"server to the metric sent over the work: median **{times(wall['median'])}** (at most "
            f"{times(wall['max'])}), in CPU seconds {times(cpu_['median'])} (at most {times(cpu_['max'])}); page "
            f"click -> metric {sec(doc['page_median_s'])} against the work's {sec(doc['library_median_s'])} "
            f"({times(page['median'])})",
            machine(doc, [doc["load_before"], doc["load_after"], *(c["load_1min"] for c in doc["clicks"])]),
            doc["command"], (name,)))
    return rows
