"""Tasks: where the examples come from, how they are tokenised, scored and evaluated.

One :class:`Task` per task name, built by :func:`get_task` from a small registry:

- ``movie-sentiment``: the embedded default (see :mod:`pruning_core.data.movie_sentiment`);
- ``file:PATH``: a local CSV / TSV / JSONL file (see :mod:`pruning_core.data.files`);
- GLUE names (``sst2``, ``mnli``, ...) and WMT names (``wmt14-fr-en``, ...) from the hub
  (see :mod:`pruning_core.data.hub`).

A task tokenises a split once (:meth:`Task.encode`, cached in memory) into an
:class:`EncodedData`, whose :meth:`~EncodedData.batches` are sorted by length so a batch holds
examples of similar length and little padding. :meth:`Task.loss_sum` gives the *summed* loss of
a batch (per example for classification, per target token for translation), so gradients of
several batches add up and can be averaged per token by the caller. :meth:`Task.evaluate` runs
under ``torch.inference_mode()`` and the head mask, and returns an :class:`EvalResult`.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from .errors import DataError, did_you_mean
from .heads import HeadMask
from .masking import apply_mask
from .progress import ProgressCallback, report
from .results import EvalResult

IGNORE = -100                   # label id ignored by the loss (padding of translation targets)
CACHE_SIZE = 8                  # EncodedData kept in memory (least recently used dropped)


# -- encoded data ----------------------------------------------------------------------------------

@dataclass
class EncodedBatch:
    """One batch, ready for ``model(**batch.inputs)``.

    inputs: kwargs for the model, on its device; no labels inside. ``input_ids`` and
        ``attention_mask`` are ``[B, T]`` (1 = real token, 0 = padding); seq2seq models also get
        ``decoder_input_ids`` ``[B, T_dec]`` (the targets shifted right).
    labels: ``[B]`` class ids (classification) or ``[B, T_dec]`` target ids, -100 = ignore.
    token_masks: per attention kind ``[B, T]``, 1 for the real tokens the kind attends from:
        ``encoder_self`` -> ``attention_mask``; ``decoder_self`` and ``cross`` -> ``labels != -100``.
    n_examples: B.
    index: ``[B]`` positions of these examples in the split's original order.
    """

    inputs: dict[str, Tensor]
    labels: Tensor
    token_masks: dict[str, Tensor]
    n_examples: int
    index: Tensor


@dataclass
class EncodedData:
    """A tokenised split, cached and shared: treat it as read-only.

    ``features[i]`` holds example i's token id lists (``input_ids``, maybe ``token_type_ids``,
    and ``labels`` for translation); ``lengths[i]`` is the sort key of the length buckets.
    """

    task: "Task"
    split: str
    n_examples: int
    fingerprint: str                        # sha256 of the examples, the tokenizer and max_length
    texts: list                             # raw examples (dicts), for showing in the UI
    references: list[str] | None            # translation targets (for BLEU), else None
    features: list[dict[str, list[int]]] = field(repr=False, default_factory=list)
    labels: list[int] | None = field(repr=False, default=None)   # classification class ids
    lengths: list[int] = field(repr=False, default_factory=list)
    specials: dict = field(repr=False, default_factory=dict)     # pad / decoder start ids
    max_length: int = 128

    def order(self, sort_by_length: bool = True) -> list[int]:
        """Example positions in batch order: by length (ties by position), or as they are."""
        if not sort_by_length:
            return list(range(self.n_examples))
        return sorted(range(self.n_examples), key=lambda i: (self.lengths[i], i))

    def batches(self, batch_size: int = 64, device: torch.device | str | None = None,
                sort_by_length: bool = True) -> Iterator[EncodedBatch]:
        """``ceil(n / batch_size)`` batches covering every example once, shortest first."""
        if batch_size < 1:
            raise DataError(f"batch_size must be at least 1, got {batch_size}.")
        order = self.order(sort_by_length)
        for start in range(0, len(order), batch_size):
            yield self.task._collate(self, order[start:start + batch_size], device)

    def padding_fraction(self, batch_size: int = 64, sort_by_length: bool = True) -> float:
        """Share of the encoder input positions that are padding, for this batching."""
        order, pad, total = self.order(sort_by_length), 0, 0
        for start in range(0, len(order), batch_size):
            lens = [len(self.features[i]["input_ids"]) for i in order[start:start + batch_size]]
            pad += max(lens) * len(lens) - sum(lens)
            total += max(lens) * len(lens)
        return pad / total if total else 0.0


def _pad(rows: Sequence[Sequence[int]], value: int) -> Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def accepts_argument(model: torch.nn.Module, name: str) -> bool:
    """Whether ``model.forward`` names ``name`` explicitly (DistilBERT takes no ``token_type_ids``)."""
    return name in inspect.signature(model.forward).parameters


def tokenize_classification(tokenizer, examples: Sequence[dict], max_length: int,
                            token_types: bool = True) -> list[dict[str, list[int]]]:
    """Token ids of text (``text``) or text-pair (``text_a``, ``text_b``) examples, truncated."""
    if not examples:
        return []
    if "text_a" in examples[0]:
        enc = tokenizer([e["text_a"] for e in examples], [e["text_b"] for e in examples],
                        truncation=True, max_length=max_length)
    else:
        enc = tokenizer([e["text"] for e in examples], truncation=True, max_length=max_length)
    keys = ["input_ids"] + (["token_type_ids"] if token_types and "token_type_ids" in enc else [])
    return [{k: list(enc[k][i]) for k in keys} for i in range(len(examples))]


def collate_classification(features: Sequence[dict[str, list[int]]], pad_id: int) -> dict[str, Tensor]:
    """Pad a list of tokenised examples: ``input_ids``, ``attention_mask`` (and ``token_type_ids``) [B, T]."""
    out = {"input_ids": _pad([f["input_ids"] for f in features], pad_id)}
    lens = torch.tensor([len(f["input_ids"]) for f in features])
    out["attention_mask"] = (torch.arange(out["input_ids"].shape[1])[None, :] < lens[:, None]).long()
    if "token_type_ids" in features[0]:
        out["token_type_ids"] = _pad([f["token_type_ids"] for f in features], 0)
    return out


# -- the encoding cache ----------------------------------------------------------------------------

_CACHE: "OrderedDict[tuple, EncodedData]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
_VOCAB_HASH: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _tokenizer_key(tokenizer) -> tuple:
    """Identify a tokenizer by name, size and a hash of its vocabulary (memoised per object)."""
    try:
        digest = _VOCAB_HASH.get(tokenizer)
    except TypeError:
        digest = None
    if digest is None:
        vocab = sorted(tokenizer.get_vocab().items())
        digest = hashlib.sha256(json.dumps(vocab, ensure_ascii=False).encode()).hexdigest()[:16]
        try:
            _VOCAB_HASH[tokenizer] = digest
        except TypeError:
            pass
    return type(tokenizer).__name__, getattr(tokenizer, "name_or_path", ""), len(tokenizer), digest


def clear_cache() -> None:
    """Forget every cached EncodedData."""
    with _CACHE_LOCK:
        _CACHE.clear()


# -- tasks -----------------------------------------------------------------------------------------

Loader = Callable[[str, "int | None"], list[dict]]


class Task:
    """One task: a data source plus how to encode, score and evaluate it.

    Subclasses (one per task type) implement ``_encode_examples``, ``_collate``, ``loss_sum`` and
    ``evaluate``; the data source is a ``loader(split, limit) -> list[dict]`` given at construction.
    """

    task_type: str = ""

    def __init__(self, name: str, loader: Loader, *, splits: Sequence[str], default_split: str,
                 metric_name: str, label_names: Sequence[str] | None = None, description: str = "",
                 cache_token: Callable[[str], str] | None = None) -> None:
        self.name = name
        self._loader = loader
        self.splits = tuple(splits)
        self.default_split = default_split
        self.metric_name = metric_name
        self.label_names = list(label_names) if label_names is not None else None
        self.num_labels = len(self.label_names) if self.label_names is not None else None
        self.description = description
        self._cache_token = cache_token or (lambda split: "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, metric={self.metric_name})"

    def check_split(self, split: str) -> None:
        if split not in self.splits:
            raise DataError(f"Task {self.name!r} has no split {split!r}.{did_you_mean(split, self.splits)} "
                            f"Its splits: {', '.join(self.splits)}.")

    def load(self, split: str, limit: int | None = None) -> list[dict]:
        """Raw examples of ``split`` (the first ``limit`` of them, in the source's order)."""
        self.check_split(split)
        if limit is not None and limit < 1:
            raise DataError(f"limit must be a positive number of examples, got {limit}.")
        rows = self._loader(split, limit)
        rows = rows[:limit] if limit is not None else rows
        if not rows:
            raise DataError(f"Task {self.name!r} split {split!r} has no examples.")
        return rows

    def encode(self, loaded, split: str, limit: int | None = None, max_length: int = 128,
               progress: ProgressCallback | None = None) -> EncodedData:
        """Tokenise ``split`` for ``loaded``'s tokenizer, once: later calls return the cached data."""
        self.check_split(split)
        if loaded.task_type != self.task_type:
            raise DataError(f"Task {self.name!r} is a {self.task_type} task but model {loaded.model_id!r} is a "
                            f"{loaded.task_type} model. Pick a {loaded.task_type} task or another model.")
        max_length = self._max_length(loaded, max_length)
        key = (self.name, self._cache_token(split), split, limit, _tokenizer_key(loaded.tokenizer), max_length,
               tuple(sorted(self._specials(loaded).items())))
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                _CACHE.move_to_end(key)
                return hit
        report(progress, "encode", 0, 1, f"{self.name} {split}")
        examples = self.load(split, limit)
        data = self._encode_examples(loaded, split, examples, max_length)
        h = hashlib.sha256(json.dumps(examples, sort_keys=True, ensure_ascii=False, default=str).encode())
        h.update(repr(key[4:]).encode())
        data.fingerprint = h.hexdigest()
        report(progress, "encode", 1, 1, f"{data.n_examples} examples")
        with _CACHE_LOCK:
            _CACHE[key] = data
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
        return data

    @staticmethod
    def _max_length(loaded, max_length: int) -> int:
        if max_length < 2:
            raise DataError(f"max_length must be at least 2 tokens, got {max_length}.")
        limit = getattr(loaded.tokenizer, "model_max_length", None)
        return min(max_length, limit) if isinstance(limit, int) and 2 <= limit < 1_000_000 else max_length

    def _specials(self, loaded) -> dict:
        return {}

    # implemented per task type
    def _encode_examples(self, loaded, split: str, examples: list[dict], max_length: int) -> EncodedData:
        raise NotImplementedError

    def _collate(self, data: EncodedData, idx: Sequence[int], device) -> EncodedBatch:
        raise NotImplementedError

    def loss_sum(self, loaded, batch: EncodedBatch, outputs) -> Tensor:
        """Scalar: the loss summed over examples (classification) or target tokens (translation)."""
        raise NotImplementedError

    def evaluate(self, loaded, data: EncodedData, mask: HeadMask | None = None, *, batch_size: int = 64,
                 beams: int = 1, progress: ProgressCallback | None = None) -> EvalResult:
        raise NotImplementedError


# -- classification --------------------------------------------------------------------------------

def accuracy(preds: Sequence[int], labels: Sequence[int]) -> float:
    return sum(int(p == y) for p, y in zip(preds, labels)) / max(1, len(labels))


def binary_f1(preds: Sequence[int], labels: Sequence[int], positive: int = 1) -> float:
    tp = sum(1 for p, y in zip(preds, labels) if p == positive and y == positive)
    fp = sum(1 for p, y in zip(preds, labels) if p == positive and y != positive)
    fn = sum(1 for p, y in zip(preds, labels) if p != positive and y == positive)
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def matthews_corrcoef(preds: Sequence[int], labels: Sequence[int]) -> float:
    """Matthews correlation (multi-class form of Gorodkin 2004); 0 when undefined."""
    classes = sorted(set(preds) | set(labels))
    n = len(labels)
    t = {k: sum(1 for y in labels if y == k) for k in classes}
    p = {k: sum(1 for q in preds if q == k) for k in classes}
    c = sum(1 for q, y in zip(preds, labels) if q == y)
    num = c * n - sum(t[k] * p[k] for k in classes)
    den = math.sqrt(n * n - sum(v * v for v in p.values())) * math.sqrt(n * n - sum(v * v for v in t.values()))
    return num / den if den else 0.0


class ClassificationTask(Task):
    """Text or text-pair classification; metric accuracy, F1 (positive class 1) or MCC."""

    task_type = "classification"

    def _specials(self, loaded) -> dict:
        return {"token_type_ids": accepts_argument(loaded.model, "token_type_ids"),
                "num_labels": getattr(loaded.model.config, "num_labels", None)}

    def _encode_examples(self, loaded, split, examples, max_length) -> EncodedData:
        n_model = getattr(loaded.model.config, "num_labels", None)
        labels = []
        for i, ex in enumerate(examples):
            label = ex.get("label")
            if not isinstance(label, int) or label < 0:
                raise DataError(f"Task {self.name!r} example {i} of {split!r} has label {label!r}; "
                                "labels must be class ids 0, 1, ...")
            if n_model is not None and label >= n_model:
                raise DataError(f"Task {self.name!r} has label {label} but model {loaded.model_id!r} has only "
                                f"{n_model} classes. Use a model fine-tuned for this task.")
            labels.append(label)
        specials = self._specials(loaded)
        features = tokenize_classification(loaded.tokenizer, examples, max_length, specials["token_type_ids"])
        pad = loaded.tokenizer.pad_token_id
        return EncodedData(task=self, split=split, n_examples=len(examples), fingerprint="", texts=examples,
                           references=None, features=features, labels=labels,
                           lengths=[len(f["input_ids"]) for f in features],
                           specials={"pad": 0 if pad is None else pad}, max_length=max_length)

    def _collate(self, data, idx, device) -> EncodedBatch:
        inputs = collate_classification([data.features[i] for i in idx], data.specials["pad"])
        inputs = {k: v.to(device) if device is not None else v for k, v in inputs.items()}
        labels = torch.tensor([data.labels[i] for i in idx], dtype=torch.long, device=device)
        return EncodedBatch(inputs=inputs, labels=labels, token_masks={"encoder_self": inputs["attention_mask"]},
                            n_examples=len(idx), index=torch.tensor(list(idx), dtype=torch.long))

    def loss_sum(self, loaded, batch, outputs) -> Tensor:
        return F.cross_entropy(outputs.logits.float(), batch.labels, reduction="sum")

    def evaluate(self, loaded, data, mask=None, *, batch_size=64, beams=1, progress=None) -> EvalResult:
        start = time.perf_counter()
        preds = [0] * data.n_examples
        loss = 0.0
        total = math.ceil(data.n_examples / batch_size)
        with torch.inference_mode(), apply_mask(loaded, mask):
            for i, batch in enumerate(data.batches(batch_size, device=loaded.device)):
                outputs = loaded.model(**batch.inputs)
                loss += float(self.loss_sum(loaded, batch, outputs))
                for j, p in zip(batch.index.tolist(), outputs.logits.argmax(-1).tolist()):
                    preds[j] = p
                report(progress, "evaluate", i + 1, total, self.name)
        labels = data.labels
        extra = {"accuracy": accuracy(preds, labels)}
        if max(labels + preds) <= 1:
            extra["f1"] = binary_f1(preds, labels)
        extra["mcc"] = matthews_corrcoef(preds, labels)
        return EvalResult(self.metric_name, float(extra[self.metric_name]), loss / data.n_examples,
                          data.n_examples, extra, time.perf_counter() - start)


# -- translation -----------------------------------------------------------------------------------

class TranslationTask(Task):
    """Sequence-to-sequence translation; metric corpus BLEU (sacrebleu), loss per target token."""

    task_type = "translation"

    def _specials(self, loaded) -> dict:
        cfg = loaded.model.config
        gen = getattr(loaded.model, "generation_config", None)
        start = getattr(cfg, "decoder_start_token_id", None)
        if start is None and gen is not None:
            start = gen.decoder_start_token_id
        pad = cfg.pad_token_id if cfg.pad_token_id is not None else loaded.tokenizer.pad_token_id
        if start is None:
            start = pad
        return {"decoder_start": int(start), "decoder_pad": int(pad)}

    def _encode_examples(self, loaded, split, examples, max_length) -> EncodedData:
        for i, ex in enumerate(examples):
            if "source" not in ex or "target" not in ex:
                raise DataError(f"Task {self.name!r} example {i} of {split!r} lacks 'source' or 'target'.")
        tok = loaded.tokenizer
        enc = tok([e["source"] for e in examples], text_target=[e["target"] for e in examples],
                  truncation=True, max_length=max_length)
        features = [{"input_ids": list(enc["input_ids"][i]), "labels": list(enc["labels"][i])}
                    for i in range(len(examples))]
        specials = self._specials(loaded)
        specials["pad"] = tok.pad_token_id if tok.pad_token_id is not None else specials["decoder_pad"]
        return EncodedData(task=self, split=split, n_examples=len(examples), fingerprint="", texts=examples,
                           references=[e["target"] for e in examples], features=features, labels=None,
                           lengths=[len(f["input_ids"]) + len(f["labels"]) for f in features],
                           specials=specials, max_length=max_length)

    def _collate(self, data, idx, device) -> EncodedBatch:
        feats = [data.features[i] for i in idx]
        inputs = collate_classification(feats, data.specials["pad"])
        labels = _pad([f["labels"] for f in feats], IGNORE)                       # [B, T_dec]
        decoder_input_ids = torch.full_like(labels, data.specials["decoder_start"])
        decoder_input_ids[:, 1:] = labels[:, :-1]                                 # shift right
        decoder_input_ids[decoder_input_ids == IGNORE] = data.specials["decoder_pad"]
        inputs["decoder_input_ids"] = decoder_input_ids
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
            labels = labels.to(device)
        target = (labels != IGNORE).long()
        return EncodedBatch(inputs=inputs, labels=labels,
                            token_masks={"encoder_self": inputs["attention_mask"], "decoder_self": target,
                                         "cross": target},
                            n_examples=len(idx), index=torch.tensor(list(idx), dtype=torch.long))

    def loss_sum(self, loaded, batch, outputs) -> Tensor:
        logits = outputs.logits.float()                                            # [B, T_dec, V]
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.labels.reshape(-1),
                               ignore_index=IGNORE, reduction="sum")

    def evaluate(self, loaded, data, mask=None, *, batch_size=64, beams=1, progress=None) -> EvalResult:
        """Teacher-forced loss per target token, and BLEU of decoded outputs (greedy when beams=1)."""
        import sacrebleu

        if beams < 1:
            raise DataError(f"beams must be at least 1 (1 = greedy decoding), got {beams}.")
        start = time.perf_counter()
        hyps = [""] * data.n_examples
        loss, tokens = 0.0, 0
        total = math.ceil(data.n_examples / batch_size)
        # the decoder's positions bound the output: start token + new tokens <= max positions
        max_new = min(data.max_length, getattr(loaded.model.config, "max_position_embeddings", 1 << 20) - 1)
        with torch.inference_mode(), apply_mask(loaded, mask):
            for i, batch in enumerate(data.batches(batch_size, device=loaded.device)):
                outputs = loaded.model(**batch.inputs)
                loss += float(self.loss_sum(loaded, batch, outputs))
                tokens += int(batch.token_masks["cross"].sum())
                generated = loaded.model.generate(
                    input_ids=batch.inputs["input_ids"], attention_mask=batch.inputs["attention_mask"],
                    num_beams=beams, do_sample=False, max_new_tokens=max_new)
                texts = loaded.tokenizer.batch_decode(generated, skip_special_tokens=True)
                for j, text in zip(batch.index.tolist(), texts):
                    hyps[j] = text.strip()
                report(progress, "evaluate", i + 1, total, self.name)
        bleu = sacrebleu.corpus_bleu(hyps, [data.references])
        extra = {"bleu": float(bleu.score), "target_tokens": tokens, "beams": beams,
                 "samples": [{"source": data.texts[j]["source"], "hypothesis": hyps[j],
                              "reference": data.references[j]} for j in range(min(3, data.n_examples))]}
        return EvalResult("bleu", float(bleu.score), loss / max(1, tokens), data.n_examples, extra,
                          time.perf_counter() - start)


# -- the registry ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class TaskEntry:
    """A registered task name: what it is, and how to build its Task."""

    name: str
    description: str
    factory: Callable[[], Task]


TASKS: dict[str, TaskEntry] = {}
FILE_PREFIX = "file:"


def register_task(name: str, description: str, factory: Callable[[], Task]) -> TaskEntry:
    entry = TaskEntry(name, description, factory)
    TASKS[name] = entry
    return entry


def task_names() -> list[str]:
    """Every registered name (``file:PATH`` is accepted too)."""
    return list(TASKS)


def _movie_sentiment() -> Task:
    from .data import movie_sentiment as ms

    def token(split: str) -> str:
        manifest = ms.read_manifest()
        return manifest["files"][f"{split}.jsonl"]["sha256"] if manifest else ""

    return ClassificationTask(ms.NAME, lambda split, limit: ms.load_split(split), splits=ms.SPLITS,
                              default_split="validation", metric_name="accuracy", label_names=ms.LABEL_NAMES,
                              description="movie review snippets, positive vs negative (the embedded default)",
                              cache_token=token)


def _file_task(spec: str) -> Task:
    from .data import files

    path = Path(spec[len(FILE_PREFIX):]).expanduser()
    if not str(path):
        raise DataError("`file:` needs a path after it, like file:data/my_examples.csv.")
    loaded = files.load_file(path)

    def loader(split: str, limit: int | None) -> list[dict]:
        return [dict(e) for e in files.load_split(path, split).examples]

    def token(split: str) -> str:
        st = path.stat()
        return f"{path.resolve()}:{st.st_mtime_ns}:{st.st_size}"

    cls = TranslationTask if loaded.task_type == "translation" else ClassificationTask
    return cls(f"{FILE_PREFIX}{path}", loader, splits=files.SPLITS, default_split="test",
               metric_name="bleu" if cls is TranslationTask else "accuracy", label_names=loaded.label_names,
               description=f"{loaded.shape} examples from {path}", cache_token=token)


def _glue(name: str) -> Callable[[], Task]:
    def factory() -> Task:
        from .data import hub
        spec = hub.glue_spec(name)
        return ClassificationTask(name, lambda split, limit: hub.load_glue(name, split, limit),
                                  splits=tuple(spec.splits), default_split="validation",
                                  metric_name=spec.metric_name, label_names=spec.label_names,
                                  description=f"GLUE {name} (Hugging Face hub)")
    return factory


def _wmt(name: str) -> Callable[[], Task]:
    def factory() -> Task:
        from .data import hub
        spec = hub.wmt_names()[name]
        return TranslationTask(name, lambda split, limit: hub.load_wmt(name, split, limit), splits=hub.WMT_SPLITS,
                               default_split="test", metric_name="bleu",
                               description=f"{spec.dataset} {spec.source_lang}->{spec.target_lang} (Hugging Face hub)")
    return factory


def _register_builtin() -> None:
    from .data import hub
    register_task("movie-sentiment", "movie review snippets, positive vs negative (embedded default)",
                  _movie_sentiment)
    for name in hub.GLUE:
        register_task(name, f"GLUE {name}", _glue(name))
    for name, spec in hub.wmt_names().items():
        register_task(name, f"{spec.dataset} {spec.source_lang}->{spec.target_lang}", _wmt(name))


_register_builtin()


def get_task(name: str) -> Task:
    """The task called ``name``: a registered name, or ``file:PATH`` for a local data file."""
    name = name.strip()
    if name.startswith(FILE_PREFIX):
        return _file_task(name)
    entry = TASKS.get(name) or TASKS.get(name.lower())
    if entry is not None:
        return entry.factory()
    from .data import hub
    if name.lower() in hub.REGRESSION:
        hub.glue_spec(name.lower())                       # raises: a regression task, with the choices
    hint = did_you_mean(name.lower(), TASKS)
    if not hint and (Path(name).expanduser().is_file() or Path(name).suffix.lower() in (".csv", ".tsv", ".jsonl")):
        hint = f" To use a data file, write 'file:{name}'."
    raise DataError(f"Unknown task {name!r}.{hint} Tasks: movie-sentiment, file:PATH, GLUE "
                    f"({', '.join(n for n in TASKS if not n.startswith('wmt') and n != 'movie-sentiment')}), "
                    "WMT (wmt14-fr-en, wmt16-de-en, wmt16-ro-en, ...).")
