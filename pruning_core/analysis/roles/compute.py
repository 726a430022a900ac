"""``compute_roles``: every role's score of every head, from the probes' eager attention maps.

The shared model is only read: maps come from plain forward passes with ``output_attentions=True``
(:func:`pruning_core.analysis.attention_maps.batch_maps`), no hook, no config change, no mode change.
"""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

from pruning_core.analysis.attention_maps import check_eager, example_text
from pruning_core.core.errors import DataError
from pruning_core.core.progress import ProgressCallback, report
from pruning_core.evaluation.results import provenance
from pruning_core.analysis.roles.base import get_role, kinds_for, role_names
from pruning_core.analysis.roles.needle import needle_prompts, needle_sequences
from pruning_core.analysis.roles.probes import (
    max_positions,
    repeat_length,
    repeated_sequences,
    text_sequences,
)
from pruning_core.analysis.roles.report import RoleReport

DEFAULT_TASK = "movie-sentiment"       # the embedded texts, there for every model once prepared
TRAIN_TEXTS = 2000                     # sentences counted for rare-word frequencies


def _task(task):
    from pruning_core.tasks import get_task
    return get_task(task or DEFAULT_TASK) if task is None or isinstance(task, str) else task


def _texts(task, split: str, limit: int | None) -> list[str]:
    return [t for t in (example_text(e)[0].strip() for e in task.load(split, limit)) if t]


def probe_texts(task, n: int) -> tuple[str, list[str]]:
    """The probe split (validation when the task has it) and its first ``n`` non-empty texts."""
    split = "validation" if "validation" in task.splits else task.default_split
    texts = _texts(task, split, n)
    if not texts:
        raise DataError(f"Task {task.name!r} split {split!r} has no text to probe the heads with; give a task "
                        "with sentences (e.g. movie-sentiment).")
    return split, texts


def token_frequency(loaded, task) -> tuple[dict[int, int], str]:
    """Token id -> count over the task's training text (its probe split when it has no train split)."""
    split = "train" if "train" in task.splits else task.default_split
    counts: Counter = Counter()
    for text in _texts(task, split, TRAIN_TEXTS):
        counts.update(loaded.tokenizer(text, add_special_tokens=False)["input_ids"])
    return dict(counts), split


def compute_roles(loaded, *, task=None, roles: Sequence[str] | None = None, seed: int = 0,
                  progress: ProgressCallback | None = None, n_texts: int = 24, max_tokens: int = 48,
                  repeat: int = 50, repeat_batch: int = 10, needles: int = 6,
                  haystack_tokens: int = 256) -> RoleReport:
    """Score every head of ``loaded`` for each role (default: every registered role).

    Args:
        loaded: a ``LoadedModel`` with eager attention; only read (safe to share).
        task: a Task, a task name, or None for the embedded movie-sentiment texts: the natural-text probe
            (its validation split), the rare-word frequencies (its train split) and the needle haystack.
        roles: role names (``roles.role_names()``); unknown names raise with the list.
        seed: draws the repeated random tokens, the needles' numbers and haystack slices.
        n_texts, max_tokens: sentences of the text probe and their length cut.
        repeat, repeat_batch: n of [BOS] + R + R (capped to the model's positions) and how many sequences.
        needles, haystack_tokens: needle prompts and their haystack length (capped to the positions).

    Returns:
        RoleReport: per role and applicable kind a ``[layers, heads]`` score array.
    """
    started = time.perf_counter()
    check_eager(loaded)
    names = list(roles) if roles else role_names()
    chosen = {n: get_role(n) for n in names}
    kinds = {n: kinds_for(r, loaded.task_type, loaded.layout.kinds) for n, r in chosen.items()}
    task = _task(task)
    by_probe = {p: [n for n in names if chosen[n].probe == p and kinds[n]] for p in ("text", "repeated", "needle")}
    split, texts = probe_texts(task, n_texts)
    frequency, freq_split = token_frequency(loaded, task) if "rare_word" in by_probe["text"] else (None, None)
    rep = repeat_length(loaded, repeat)
    probes = {
        "text": (lambda: text_sequences(loaded, texts, max_tokens=max_tokens, frequency=frequency),
                 f"{len(texts)} sentences of {task.name} ({split}), at most {max_tokens} tokens each",
                 {"sequences": len(texts), "max_tokens": max_tokens}),
        "repeated": (lambda: repeated_sequences(loaded, rep, repeat_batch, seed),
                     f"{repeat_batch} sequences [BOS] + R + R, R = {rep} uniform random non-special token ids "
                     f"(seed {seed})", {"sequences": repeat_batch, "n": rep}),
    }
    if by_probe["needle"]:
        prompts = needle_prompts(loaded, texts, count=needles, haystack_tokens=haystack_tokens, seed=seed)
        probes["needle"] = (lambda: needle_sequences(loaded, prompts),
                            f"{len(prompts)} needle-in-a-haystack prompts ({len(prompts[0].ids)} tokens; haystack "
                            f"of {task.name} sentences, a 5-digit number at depths "
                            f"{', '.join(f'{p.depth:.2f}' for p in prompts)}), greedy decoding (seed {seed})",
                            {"sequences": len(prompts), "prompt_tokens": len(prompts[0].ids)})
    total = sum(probes[p][2]["sequences"] for p in probes if by_probe[p])
    done = 0
    scores = {n: {} for n in names}
    for probe, members in by_probe.items():
        if not members:
            continue
        accs = {(n, k): chosen[n].accumulator() for n in members for k in kinds[n]}
        for seqs in probes[probe][0]():
            for (n, k), acc in accs.items():
                acc.add(seqs[k])
            done += 1
            report(progress, "roles", done, total, f"{probe} probe")
        for (n, k), acc in accs.items():
            scores[n][k] = acc.result(loaded.layout.kinds[k])
    info = {}
    for n, role in chosen.items():
        entry = {"probe": role.probe, "score": role.score, "threshold": role.threshold, "kinds": list(kinds[n])}
        if kinds[n]:
            entry.update(input=probes[role.probe][1], size=probes[role.probe][2])
        else:
            entry["input"] = f"not computed: the role does not apply to a {loaded.task_type} model's attention kinds"
        if n == "rare_word" and frequency is not None:
            entry["frequency"] = f"token counts over {task.name} ({freq_split}, up to {TRAIN_TEXTS} texts)"
        info[n] = entry
    settings = {"roles": names, "seed": seed, "n_texts": len(texts), "max_tokens": max_tokens, "repeat": rep,
                "repeat_batch": repeat_batch, "needles": needles, "haystack_tokens": haystack_tokens,
                "max_positions": max_positions(loaded.model.config), "seconds": round(time.perf_counter() - started, 2)}
    return RoleReport(loaded.layout, scores, {n: chosen[n].threshold for n in names}, info,
                      provenance(loaded, task=task.name, split=split, n_examples=len(texts), method="roles",
                                 settings=settings))
