"""Retrieval heads (Wu et al., ICLR 2025): needle-in-a-haystack prompts decoded greedily.

A prompt is a haystack of the task's own sentences (offline: the embedded texts) with a needle
``" The secret number is 48213."`` at a chosen depth, then the question ``"What is the secret number?
The secret number is"``. The model decodes greedily as many tokens as the number has; at each step a head
earns 1/|answer| when its most attended position lies in the needle's number and the generated token
equals the token there (it copied from the needle). The score is the mean over prompts. Decoder-only
language models only; the maps are those of the step that produced each token (eager attention, cache on).
"""
from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from pruning_core.modeling.architectures import adapter_for
from pruning_core.analysis.attention_maps import check_eager
from pruning_core.core.errors import HeadpruneError
from pruning_core.core.heads import HeadMask
from pruning_core.modeling.masking import apply_mask
from pruning_core.analysis.roles.base import MeanOverSequences, ProbeSequence, Role, register_role
from pruning_core.analysis.roles.probes import max_positions, special_ids

NEEDLE = " The secret number is"
QUESTION = "\nWhat is the secret number? The secret number is"
THRESHOLD = 0.1             # Wu et al. call a head with a retrieval score above 0.1 a retrieval head


@dataclass(frozen=True)
class NeedlePrompt:
    ids: tuple[int, ...]              # the whole prompt: [BOS] + haystack with needle + question
    span: tuple[int, int]             # [start, end) positions of the number inside ``ids``
    answer: tuple[int, ...]           # the number's token ids (what a correct model generates)
    depth: float                      # where the needle sits in the haystack (0 = start, 1 = end)


def needle_prompts(loaded, texts: Sequence[str], *, count: int = 6, haystack_tokens: int = 256,
                   seed: int = 0) -> list[NeedlePrompt]:
    """``count`` prompts at depths (i + 0.5) / count, each with its own seeded 5-digit number and haystack slice."""
    tok = loaded.tokenizer
    if not texts:
        raise HeadpruneError("The needle probe needs some text for its haystack; give a task with texts.")
    pieces = {name: tok(s, add_special_tokens=False)["input_ids"] for name, s in (("needle", NEEDLE),
                                                                                    ("question", QUESTION), (".", "."))}
    prefix = tok("")["input_ids"]                      # [BOS] when the tokenizer adds one
    fixed = len(prefix) + len(pieces["needle"]) + len(pieces["question"]) + len(pieces["."]) + 12
    budget = min(haystack_tokens, (max_positions(loaded.model.config) or 4096) - fixed - 8)
    if budget < 8:
        raise HeadpruneError(f"The model takes too few positions ({max_positions(loaded.model.config)}) for a "
                             "needle-in-a-haystack prompt; leave the retrieval role out (--roles ...).")
    hay = tok(" " + " ".join(t.strip() for t in texts), add_special_tokens=False)["input_ids"]
    if not hay:
        raise HeadpruneError("The tokenizer turns the task's texts into no tokens, so there is no haystack for the "
                             "needle probe. Check the model's tokenizer files, or leave retrieval out (--roles ...).")
    while len(hay) < 2 * budget:
        hay = hay + hay
    rng = random.Random(seed)
    prompts = []
    for i in range(count):
        start = rng.randrange(len(hay) - budget)
        window = hay[start:start + budget]
        number = rng.randint(10000, 99999)
        answer = tok(f" {number}", add_special_tokens=False)["input_ids"]
        if not answer:
            raise HeadpruneError(f"The model's tokenizer turns the needle's number {number} into no tokens, so the "
                                 "retrieval probe cannot ask for it; check the tokenizer files (numbers must survive "
                                 "tokenization), or leave retrieval out (--roles ...).")
        cut = int(round((i + 0.5) / count * budget))
        head = prefix + window[:cut] + pieces["needle"]
        ids = head + answer + pieces["."] + window[cut:] + pieces["question"]
        prompts.append(NeedlePrompt(tuple(ids), (len(head), len(head) + len(answer)), tuple(answer),
                                    (i + 0.5) / count))
    return prompts


def greedy_answer(loaded, prompt: NeedlePrompt, mask: HeadMask | None = None,
                  attentions: bool = False) -> tuple[list[int], list[np.ndarray] | None]:
    """Greedy decoding of ``len(prompt.answer)`` tokens under ``mask`` (1 = keep; None = all heads).

    Returns the generated ids and, with ``attentions``, per layer ``[heads, steps, T_prompt + steps - 1]``:
    row s is the attention of the query that produced token s (keys not yet there are 0).
    """
    model = loaded.model
    if attentions:
        check_eager(loaded)
    adapter = adapter_for(loaded)
    steps = len(prompt.answer)
    total = len(prompt.ids) + steps - 1
    rows: list[np.ndarray] | None = None
    generated: list[int] = []
    with torch.inference_mode(), apply_mask(loaded, mask):
        ids = torch.tensor([prompt.ids], device=loaded.device)
        out = model(input_ids=ids, use_cache=True, output_attentions=attentions)
        for step in range(steps):
            token = int(out.logits[0, -1].argmax())
            if attentions:
                maps = adapter.attention_maps(out)["decoder_self"]           # each [1, heads, q, keys so far]
                if rows is None:
                    rows = [np.zeros((a.shape[1], steps, total), np.float32) for a in maps]
                for layer, a in enumerate(maps):
                    last = a[0, :, -1].float().cpu().numpy()                 # [heads, keys so far]
                    rows[layer][:, step, :last.shape[1]] = last
            generated.append(token)
            if step + 1 < steps:
                nxt = torch.tensor([[token]], device=loaded.device)
                out = model(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True,
                            output_attentions=attentions)
    return generated, rows


def needle_sequences(loaded, prompts: Sequence[NeedlePrompt]) -> Iterator[dict[str, ProbeSequence]]:
    """The ``needle`` probe: per prompt, ``decoder_self`` maps of the generated steps (queries = generated ids)."""
    specials = special_ids(loaded.tokenizer)
    for p in prompts:
        generated, rows = greedy_answer(loaded, p, attentions=True)
        keys = np.asarray(list(p.ids) + generated[:-1])
        yield {"decoder_self": ProbeSequence(tuple(rows), np.asarray(generated), keys, True, np.isin(keys, list(specials)),
                                             {"needle": p.span, "answer": len(p.answer)})}


def needle_accuracy(loaded, prompts: Sequence[NeedlePrompt], mask: HeadMask | None = None) -> float:
    """Share of prompts whose greedy answer is exactly the needle's number."""
    return float(np.mean([greedy_answer(loaded, p, mask)[0] == list(p.answer) for p in prompts]))


def retrieval(seq: ProbeSequence, a: np.ndarray) -> np.ndarray:
    start, end = seq.marks["needle"]
    top = a.argmax(axis=2)                                              # [heads, steps]
    copied = (top >= start) & (top < end) & (seq.key_ids[top] == seq.query_ids[None, :])
    return copied.sum(axis=1) / seq.marks["answer"]


register_role(Role("retrieval", "retrieval (copies from context)", "needle", THRESHOLD,
                   "needle-in-a-haystack prompts decoded greedily: per step 1/|number| when the head's most attended "
                   "position is in the needle's number and the generated token equals the token there; mean over "
                   "prompts (decoder-only language models)", ("decoder_self",), lambda: MeanOverSequences(retrieval),
                   task_types=("language_model",)))
