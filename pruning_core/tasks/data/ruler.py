"""RULER-style synthetic long-context examples (Hsieh et al. 2024, arXiv:2404.06654) and few-shot
abstract-pattern examples of in-context learning (after Crosbie & Shutova, Findings of NAACL 2025), generated
offline from a seed; the tasks and how each is built: docs/METHODS.md, "Long context".

Word lists: :mod:`.wordlists` (wonderwords 3.0.1, the lists RULER reads).
Each task is a *spec* drawn from a seeded ``random.Random`` and a *render* ``render(spec, words, k) ->
(prompt, answers)`` whose filler grows with ``k``; :func:`fit` picks the largest ``k`` whose prompt fits a
token budget. The split is fixed: an example's primary answer goes to ``train`` or ``test`` by
``int(sha256(task:answer)) % 2``, so no answer of one split appears in the other. The in-context kinds
(:data:`ICL`) split the nouns instead (``int(sha256(icl:noun)) % 2``): every word of an example, its
demonstrations' and its query's, comes from its split's half, and its filler units are the demonstrations.
"""
from __future__ import annotations

import hashlib
import random
import string
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pruning_core.core.errors import DataError
from pruning_core.tasks.data.wordlists import Words

NAME = "ruler"
SPLITS: tuple[str, ...] = ("train", "test")
SPLIT_SIZE = 500                          # examples per split
RULER, ICL, ICL_FAR = "ruler", "icl", "icl-far"      # the kinds' families (far: demonstrations deep in noise)
ICL_SHOTS = 12                            # demonstrations of an in-context example (its filler units)
ICL_WORDS = 2 * (ICL_SHOTS + 1)           # distinct nouns of an in-context example: its pairs and its query's
ICL_WORD_LETTERS = (3, 7)                 # the nouns an in-context example draws: single words of 3 to 7 letters
ICL_FAR_DEPTH = (0.25, 0.75)              # where a far example's demonstrations sit in its noise (uniform)
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."


# -- examples: specs and their rendering ----------------------------------------------------------------

def _seed(*parts) -> int:
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:16], 16)


def split_of(task: str, answer: str) -> str:
    """The fixed split of an example by its primary answer (see the module docstring)."""
    return SPLITS[_seed(task, answer) % 2]


def _number(rng: random.Random) -> str:
    return str(rng.randint(1_000_000, 9_999_999))


def _word_key(rng: random.Random, words: Words) -> str:
    return f"{rng.choice(words.adjectives)}-{rng.choice(words.nouns)}"


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _needle(key: str, value: str, noun: str = "number") -> str:
    return f"One of the special magic {noun}s for {key} is: {value}."


def _niah_prompt(context: str, key: str, noun: str = "number") -> tuple[str, str]:
    """RULER's niah template and answer prefix in the singular form its ``niah.py`` uses when one value is asked
    (every niah kind here): "A special magic number is hidden ...", "... for KEY mentioned in the provided text is"."""
    return (f"A special magic {noun} is hidden within the following text. Make sure to memorize it. I will quiz "
            f"you about the {noun} afterwards.\n{context}\nWhat is the special magic {noun} for {key} mentioned in "
            "the provided text?",
            f"The special magic {noun} for {key} mentioned in the provided text is")


def _noise_with(inserts: list[tuple[float, str]], k: int) -> str:
    """``k`` noise paragraphs with each ``(depth in [0, 1], sentence)`` inserted between them, in depth order."""
    parts = [NOISE] * k
    for depth, sentence in sorted(inserts, key=lambda x: x[0], reverse=True):
        parts.insert(round(depth * k), sentence)
    return " ".join(parts)


# Each kind: spec(rng, words) -> spec dict with "answer" (primary) and "answers"; render(spec, words, k).
def _spec_niah_single(rng, words):
    key, value = _word_key(rng, words), _number(rng)
    return {"key": key, "value": value, "depth": rng.random(), "answer": value, "answers": [value]}


def _render_niah_single(spec, words, k):
    return _niah_prompt(_noise_with([(spec["depth"], _needle(spec["key"], spec["value"]))], k), spec["key"])


def _key_value(rng: random.Random, words: Words, uuids: bool) -> tuple[str, str]:
    """A needle's key and value: two UUIDs, or a word key and a 7-digit number."""
    key = _uuid(rng) if uuids else _word_key(rng, words)
    return key, _uuid(rng) if uuids else _number(rng)


def _codes(rng: random.Random, n: int, alphabet: str, length: int) -> list[str]:
    """``n`` distinct strings of ``length`` letters drawn from ``alphabet``, in the order drawn."""
    codes: list[str] = []
    while len(codes) < n:
        code = "".join(rng.choices(alphabet, k=length))
        if code not in codes:
            codes.append(code)
    return codes


def _spec_multikey(uuids: bool):
    def spec(rng, words):
        key, value = _key_value(rng, words, uuids)
        return {"key": key, "value": value, "depth": rng.random(), "seed": rng.getrandbits(48), "uuids": uuids,
                "answer": value, "answers": [value]}
    return spec


def _render_multikey(spec, words, k):
    rng = random.Random(spec["seed"])
    noun = "uuid" if spec["uuids"] else "number"
    needles, seen = [], {spec["key"]}
    while len(needles) < k:
        key, value = _key_value(rng, words, spec["uuids"])
        if key not in seen:
            seen.add(key)
            needles.append(_needle(key, value, noun))
    needles.insert(round(spec["depth"] * k), _needle(spec["key"], spec["value"], noun))
    return _niah_prompt(" ".join(needles), spec["key"], noun)


def _spec_vt(rng, words):
    names = _codes(rng, 5, string.ascii_uppercase, 5)
    value = str(rng.randint(10_000, 99_999))
    depths = sorted(rng.random() for _ in names)
    return {"variables": names, "value": value, "depths": depths, "answer": value, "answers": names}


def _render_vt(spec, words, k):
    names, value = spec["variables"], spec["value"]
    chain = [f"VAR {names[0]} = {value}."] + [f"VAR {b} = VAR {a}." for a, b in zip(names, names[1:])]
    context = _noise_with([(d, s) for d, s in zip(spec["depths"], chain)], k)
    return (f"Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
            f"Question: Find all variables that are assigned the value {value} in the text above.",
            f"Answer: According to the chain(s) of variable assignment in the text above, {len(names)} variables "
            f"are assigned the value {value}, they are:")


def _spec_cwe(rng, words):
    pool = words.all
    common = rng.sample(pool, 10)
    return {"common": common, "seed": rng.getrandbits(48), "answer": " ".join(sorted(common)), "answers": common}


def cwe_frequencies(context: int) -> tuple[int, int]:
    """(freq_cw, freq_ucw) at ``context`` tokens: RULER's 30 / 3 from 4k tokens on; 10 / 2 from 2k; 4 / 1 below."""
    return (30, 3) if context >= 4096 else (10, 2) if context >= 2048 else (4, 1)


def _render_cwe(spec, words, k, budget: int = 0):
    rng = random.Random(spec["seed"])
    freq_cw, freq_ucw = cwe_frequencies(budget)
    common = set(spec["common"])
    others = [w for w in rng.sample(words.all, min(len(words.all), k + 10)) if w not in common][:k]
    entries = list(spec["common"]) * freq_cw + others * freq_ucw
    rng.shuffle(entries)
    context = " ".join(f"{i + 1}. {w}" for i, w in enumerate(entries))
    return ("Below is a numbered list of words. In these words, some appear more often than others. Memorize the "
            f"ones that appear most often.\n{context}\nQuestion: What are the 10 most common words in the above "
            "list?", "Answer: The top 10 words that appear most often in the list are:")


def _spec_fwe(rng, words):
    vocab = _codes(rng, 200, string.ascii_lowercase, 3)
    return {"vocab": vocab, "seed": rng.getrandbits(48), "answer": " ".join(vocab[1:4]), "answers": vocab[1:4]}


def _zipf_ranks(rng: random.Random, n: int, size: int, alpha: float = 2.0) -> list[int]:
    """``n`` ranks 0..size-1 drawn with P(rank r) ~ 1 / (r + 1) ** alpha."""
    weights = [1.0 / (r + 1) ** alpha for r in range(size)]
    return rng.choices(range(size), weights=weights, k=n)


def _render_fwe(spec, words, k):
    rng = random.Random(spec["seed"])
    vocab = spec["vocab"]
    ranks = _zipf_ranks(rng, k, len(vocab))
    # the answer must be the three most frequent coded words, strictly: keep ranks 1..3 on top by construction
    counts = Counter(ranks)
    top = [counts.get(r, 0) for r in (1, 2, 3)]
    floor = max([c for r, c in counts.items() if r > 3], default=0)
    need = [max(0, floor + 1 + (2 - i) - top[i]) for i in range(3)]
    for i, extra in enumerate(need):
        ranks += [i + 1] * extra
    rng.shuffle(ranks)
    context = " ".join("...." if r == 0 else vocab[r] for r in ranks)
    return ("Read the following coded text and track the frequency of each coded word. Find the three most "
            f"frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore "
            "the dots '....'. What are the three most frequently appeared words in the above coded text?",
            "Answer: According to the coded text above, the three most frequently appeared words are:")


# In-context kinds: spec(rng, pool) with ``pool`` the split's nouns (:func:`icl_pool`); render(spec, words, k).
def icl_pool(words: Words, split: str) -> tuple[str, ...]:
    """The nouns of ``split`` an in-context example draws from: single words of :data:`ICL_WORD_LETTERS`
    letters, each in one split by ``int(sha256(icl:noun)) % 2``."""
    low, high = ICL_WORD_LETTERS
    return tuple(w for w in words.nouns if w.isalpha() and low <= len(w) <= high and split_of(ICL, w) == split)


def _spec_icl(rule: tuple[int, ...]):
    """Pairs of nouns completed by ``rule`` (the pair's positions written after ``->``); no noun occurs twice in an
    example, so the query's answer is nowhere in its demonstrations."""
    def spec(rng, pool):
        drawn = rng.sample(pool, ICL_WORDS)
        pairs = [drawn[i:i + 2] for i in range(0, ICL_WORDS, 2)]
        query = pairs[-1]
        answer = " ".join(query[i] for i in rule)
        return {"shots": pairs[:-1], "query": query, "rule": list(rule), "answer": answer, "answers": [answer]}
    return spec


def icl_line(pair: Sequence[str], rule: Sequence[int]) -> str:
    """One demonstration: ``a b -> `` and the pair's words in ``rule``'s order."""
    return f"{pair[0]} {pair[1]} -> {' '.join(pair[i] for i in rule)}"


def _render_icl(spec, words, k):
    """``k`` demonstrations, one a line, then the query's pair; the answer prefix is the arrow."""
    shots = "\n".join(icl_line(p, spec["rule"]) for p in spec["shots"][:k])
    return f"{shots}\n{spec['query'][0]} {spec['query'][1]}", "->"


def _spec_icl_far(rule: tuple[int, ...]):
    """:func:`_spec_icl`'s example (drawn as its ``drawn_as`` kind's of the same index), and the depth of its
    demonstrations in the noise (:data:`ICL_FAR_DEPTH`)."""
    def spec(rng, pool):
        drawn = _spec_icl(rule)(rng, pool)
        return {**drawn, "depth": rng.uniform(*ICL_FAR_DEPTH)}
    return spec


def _render_icl_far(spec, words, k):
    """Every demonstration as one block at the spec's depth of ``k`` noise paragraphs, then the query's pair: the
    rule is read from far back (beyond a streaming head's sink and window at 2k), never from the last lines."""
    shots = "\n".join(icl_line(p, spec["rule"]) for p in spec["shots"])
    noise = _noise_with([(spec["depth"], f"\n{shots}\n")], k)
    return f"{noise}\n{spec['query'][0]} {spec['query'][1]}", "->"


@dataclass(frozen=True)
class Kind:
    """One task: how a spec is drawn, how it renders, how many tokens the answer may need.

    family: :data:`RULER` (split by answer; right when every answer string occurs in the greedy answer) or
    :data:`ICL` (split by noun, :func:`icl_pool`; right when the greedy answer's first line is the answer, word
    for word; decoding stops at the line's end) or :data:`ICL_FAR` (the same, its demonstrations deep in noise
    filler). ruler_name: the source task's name (RULER's, or the pattern's).
    """

    name: str
    ruler_name: str
    spec: Callable
    render: Callable
    new_tokens: int                 # greedy tokens generated for the answer
    description: str
    family: str = RULER
    drawn_as: str | None = None     # another kind whose examples this one draws (a far kind: its short kind's)

    @property
    def in_context(self) -> bool:
        """Split by noun and judged by the answer's first line (:data:`ICL` and :data:`ICL_FAR`)."""
        return self.family in (ICL, ICL_FAR)


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("niah-single", "niah_single_1", _spec_niah_single, _render_niah_single, 16,
         "one 7-digit needle in repeated noise sentences (RULER niah_single_1)"),
    Kind("niah-multikey", "niah_multikey_2", _spec_multikey(False), _render_multikey, 16,
         "a 7-digit needle among distractor needles with other word keys (RULER niah_multikey_2)"),
    Kind("niah-multikey-uuid", "niah_multikey_3", _spec_multikey(True), _render_multikey, 40,
         "a UUID needle among distractor needles with UUID keys (RULER niah_multikey_3)"),
    Kind("variable-tracking", "vt", _spec_vt, _render_vt, 32,
         "every variable of a 5-step assignment chain in noise (RULER vt)"),
    Kind("common-words", "cwe", _spec_cwe, _render_cwe, 72,
         "the 10 most common words of a numbered word list (RULER cwe)"),
    Kind("frequent-words", "fwe", _spec_fwe, _render_fwe, 24,
         "the 3 most frequent coded words of a Zipf-distributed text (RULER fwe)"),
    Kind("icl-repetition", "repetition ABAB", _spec_icl((0, 1)), _render_icl, 16,
         "few-shot pattern a b -> a b (repetition, ABAB) over random nouns: in-context learning", family=ICL),
    Kind("icl-recursion", "recursion ABBB", _spec_icl((1, 1)), _render_icl, 16,
         "few-shot pattern a b -> b b (recursion, ABBB) over random nouns: in-context learning", family=ICL),
    Kind("icl-centre-embedding", "centre-embedding ABBA", _spec_icl((1, 0)), _render_icl, 16,
         "few-shot pattern a b -> b a (centre-embedding, ABBA) over random nouns: in-context learning", family=ICL),
    Kind("icl-repetition-far", "repetition ABAB, far", _spec_icl_far((0, 1)), _render_icl_far, 16,
         "icl-repetition's 12 demonstrations deep in noise, the query at the end: in-context learning read from far "
         "back", family=ICL_FAR, drawn_as="icl-repetition"),
    Kind("icl-recursion-far", "recursion ABBB, far", _spec_icl_far((1, 1)), _render_icl_far, 16,
         "icl-recursion's 12 demonstrations deep in noise, the query at the end (copying the query is wrong here): "
         "in-context learning read from far back", family=ICL_FAR, drawn_as="icl-recursion"),
)}
RULER_KINDS: tuple[str, ...] = tuple(n for n, k in KINDS.items() if k.family == RULER)
ICL_KINDS: tuple[str, ...] = tuple(n for n, k in KINDS.items() if k.family == ICL)
ICL_FAR_KINDS: tuple[str, ...] = tuple(n for n, k in KINDS.items() if k.family == ICL_FAR)


def specs(kind: str, split: str, words: Words, limit: int | None = None, seed: int = 0) -> list[dict]:
    """The first ``limit`` (at most :data:`SPLIT_SIZE`) example specs of ``kind`` in ``split``, from ``seed``."""
    if split not in SPLITS:
        raise DataError(f"RULER tasks have the splits {', '.join(SPLITS)}, not {split!r}.")
    k = KINDS[kind]
    n = min(limit or SPLIT_SIZE, SPLIT_SIZE)
    if k.in_context:
        pool = icl_pool(words, split)
        if len(pool) < ICL_WORDS:
            raise DataError(f"The word lists hold {len(pool)} nouns of {ICL_WORD_LETTERS[0]} to "
                            f"{ICL_WORD_LETTERS[1]} letters for split {split!r}; {kind!r} needs {ICL_WORDS}. "
                            "Run `headprune prepare --force` to fetch the wonderwords lists again.")
        return [{"id": f"{kind}-{split}-{i}", "kind": kind,
                 **k.spec(random.Random(_seed(NAME, k.drawn_as or kind, seed, split, i)), pool)} for i in range(n)]
    out, attempt = [], 0
    while len(out) < n:
        spec = k.spec(random.Random(_seed(NAME, kind, seed, attempt)), words)
        attempt += 1
        if split_of(kind, spec["answer"]) == split:
            out.append({"id": f"{kind}-{split}-{len(out)}", "kind": kind, **spec})
    return out


def render(spec: dict, words: Words, k: int, budget: int) -> tuple[str, str]:
    """``(prompt, answer prefix)`` of ``spec`` with ``k`` filler units (``budget``: the target tokens)."""
    kind = KINDS[spec["kind"]]
    if kind.render is _render_cwe:
        return _render_cwe(spec, words, k, budget)
    return kind.render(spec, words, k)


def max_units(spec: dict, words: Words) -> int:
    """The most filler units ``spec`` can render (common words: the distinct words left; a short in-context
    example: its demonstrations; else no limit)."""
    if KINDS[spec["kind"]].family == ICL:
        return len(spec["shots"])
    return len(words.all) - 10 if spec["kind"] == "common-words" else 1 << 20


def fit(length: Callable[[int], int], budget: int, most: int = 1 << 20) -> int:
    """The largest ``k`` in ``[1, most]`` with ``length(k) <= budget`` (``length`` nondecreasing in ``k``)."""
    if length(1) > budget:
        raise DataError(f"A context of {budget} tokens cannot hold even the question; give a larger --context.")
    lo, hi = 1, 2
    while length(min(hi, most)) <= budget:
        if hi >= most:
            return most
        lo, hi = hi, hi * 2
    hi = min(hi, most)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if length(mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo
