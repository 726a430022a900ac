"""One role's probe, one sequence, for the Attention page: what the model was fed, every head's attention
map on it, and each head's score for the role on this one sequence (the role report averages many
sequences: :func:`app.roles.cache.roles`). A student picks "induction", sees [BOS] + R + R and the stripe
an induction head draws one token right of the first copy.

Pure: no Streamlit. :func:`app.roles.cache.role_probe` runs :func:`probe_view` on the shared model (eager
attention, only read: the library's probe functions make plain forward passes) and caches it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pruning_core.core.errors import UsageError
from pruning_core.analysis.roles import get_role
from pruning_core.analysis.roles.base import kinds_for
from pruning_core.analysis.roles.compute import probe_texts, token_frequency
from pruning_core.analysis.roles.needle import needle_prompts, needle_sequences
from pruning_core.analysis.roles.probes import repeat_length, repeated_sequences, text_sequences

REPEAT = 20           # tokens of R in the [BOS] + R + R shown (the report uses 50: this map stays readable)
HAYSTACK = 96         # haystack tokens of the needle prompt shown (the report uses 256)
TEXTS = 24            # sentences the needle's haystack is cut from (as the report's text probe)


@dataclass(frozen=True)
class ProbeView:
    """One probe sequence's maps for one role.

    ``maps[kind][layer]``: ``[heads, T_query, T_key]`` float32 (each row sums to 1); ``tokens[kind]``:
    (query tokens, key tokens); ``scores[kind]``: ``[layers, max heads]`` the role's score of each head on
    this sequence (NaN beyond a layer's heads). ``stripe``: (first query, last query, key offset) of the
    cells an induction head attends to (key = query - offset); ``span``: [start, end) key positions of the
    needle's number (retrieval).
    """

    role: str
    probe: str
    input: str
    tokens: dict
    maps: dict
    scores: dict
    threshold: float
    stripe: tuple[int, int, int] | None = None
    span: tuple[int, int] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(self.maps)

    def ranked(self, kind: str) -> list[tuple[int, int, float]]:
        """Every (layer, head, score) of ``kind``, highest score on this sequence first."""
        grid = self.scores[kind]
        cells = [(l, h, float(grid[l, h])) for l in range(grid.shape[0]) for h in range(grid.shape[1])
                 if grid[l, h] == grid[l, h]]
        return sorted(cells, key=lambda c: -c[2])


def _tokens(tok, ids) -> tuple[str, ...]:
    if ids is None:
        return ()
    return tuple(str(t) for t in tok.convert_ids_to_tokens([int(i) for i in ids]))


def probe_view(loaded, task, role_name: str, seed: int = 0) -> ProbeView:
    """The first sequence of ``role_name``'s probe on ``loaded`` (a Task gives the sentences), its maps and
    each head's score for the role on it.

    Raises:
        UsageError: the role does not apply to this model (e.g. induction on an encoder).
    """
    role = get_role(role_name)
    kinds = kinds_for(role, loaded.task_type, loaded.layout.kinds)
    if not kinds:
        raise UsageError(f"The {role.title} role does not apply to this model's attention; choose another role.")
    stripe = span = None
    notes: list[str] = []
    if role.probe == "text":
        split, texts = probe_texts(task, 1)
        frequency = token_frequency(loaded, task)[0] if role_name == "rare_word" else None
        seqs = next(text_sequences(loaded, texts, frequency=frequency))
        what = f"the first sentence of {task.name} ({split}), at most 48 tokens"
    elif role.probe == "repeated":
        n = repeat_length(loaded, REPEAT)
        seqs = next(repeated_sequences(loaded, n=n, batch=1, seed=seed))
        start = seqs[kinds[0]].marks["start"]
        stripe = (start, start + n - 1, n - 1)
        what = (f"[BOS] + R + R: R is {n} random token ids (seed {seed}), then R again. In the second copy an "
                f"induction head attends to the token after the current token's first occurrence, {n - 1} "
                "positions back: a stripe parallel to the diagonal (dotted)")
    else:
        _, texts = probe_texts(task, TEXTS)
        prompt = needle_prompts(loaded, texts, count=1, haystack_tokens=HAYSTACK, seed=seed)[0]
        seqs = next(needle_sequences(loaded, [prompt]))
        span = prompt.span
        what = (f"a needle-in-a-haystack prompt of {len(prompt.ids)} tokens (a secret number hidden in "
                f"{task.name} sentences, then the question); rows are the answer's tokens as the model writes "
                "them, the needle's number is framed: a retrieval head reads each digit from there")
        notes.append(f"The report's retrieval scores use 6 prompts of a 256-token haystack; this one has {HAYSTACK}.")
    tok = loaded.tokenizer
    scores, maps, tokens = {}, {}, {}
    for kind in kinds:
        seq = seqs[kind]
        acc = role.accumulator()
        acc.add(seq)
        scores[kind] = acc.result(loaded.layout.kinds[kind])
        maps[kind] = tuple(np.asarray(a, dtype=np.float32) for a in seq.maps)
        keys = _tokens(tok, seq.key_ids) or tuple(f"frame {i}" for i in range(seq.maps[0].shape[2]))
        tokens[kind] = (_tokens(tok, seq.query_ids), keys)
    return ProbeView(role_name, role.probe, what, tokens, maps, scores, role.threshold, stripe, span, tuple(notes))
