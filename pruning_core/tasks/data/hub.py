"""GLUE and WMT data from the Hugging Face hub, through ``datasets.load_dataset``.

GLUE (``nyu-mll/glue``: ``sst2 mnli qnli qqp mrpc cola rte wnli``): splits ``train`` and ``validation`` (test
labels are hidden; ``mnli`` also offers ``validation_mismatched``); the regression task ``stsb`` is refused.
WMT (``wmt/wmt14``, ``wmt/wmt16``): ``wmtYY-SRC-TGT`` translates SRC into TGT; ``train`` is streamed, so a
``limit`` does not download millions of pairs. Offline this fails fast: the library's one hub probe
(:mod:`pruning_core.core.runtime.hub_probe`) is asked first unless ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``
is set (then ``datasets`` reads its cache only); an unreachable hub is a :class:`DataError` suggesting
``file:PATH``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from pruning_core.core.errors import DataError
from pruning_core.core.runtime import hub_probe

GLUE_DATASET = "nyu-mll/glue"


@dataclass(frozen=True)
class GlueSpec:
    name: str
    columns: tuple[str, ...]            # one column (single text) or two (pair)
    label_names: tuple[str, ...]
    metric_name: str                    # the standard GLUE metric: accuracy, f1 or mcc
    splits: dict                        # our split name -> the dataset's split name


_TWO = {"train": "train", "validation": "validation"}
GLUE: dict[str, GlueSpec] = {s.name: s for s in [
    GlueSpec("sst2", ("sentence",), ("negative", "positive"), "accuracy", _TWO),
    GlueSpec("cola", ("sentence",), ("unacceptable", "acceptable"), "mcc", _TWO),
    GlueSpec("mrpc", ("sentence1", "sentence2"), ("not_equivalent", "equivalent"), "f1", _TWO),
    GlueSpec("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), "f1", _TWO),
    GlueSpec("qnli", ("question", "sentence"), ("entailment", "not_entailment"), "accuracy", _TWO),
    GlueSpec("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"), "accuracy", _TWO),
    GlueSpec("wnli", ("sentence1", "sentence2"), ("not_entailment", "entailment"), "accuracy", _TWO),
    GlueSpec("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), "accuracy",
             {"train": "train", "validation": "validation_matched",
              "validation_matched": "validation_matched", "validation_mismatched": "validation_mismatched"}),
]}
REGRESSION = {"stsb": "STS-B"}

# dataset -> the language pairs it has (config names are "xx-en")
WMT_PAIRS: dict[str, tuple[str, ...]] = {
    "wmt14": ("cs-en", "de-en", "fr-en", "hi-en", "ru-en"),
    "wmt16": ("cs-en", "de-en", "fi-en", "ro-en", "ru-en", "tr-en"),
}
WMT_SPLITS: tuple[str, ...] = ("train", "validation", "test")


@dataclass(frozen=True)
class WmtSpec:
    name: str              # "wmt14-fr-en"
    dataset: str           # "wmt/wmt14"
    config: str            # "fr-en"
    source_lang: str
    target_lang: str


def wmt_names() -> dict[str, WmtSpec]:
    """Every WMT task name, both directions of every pair."""
    out = {}
    for year, pairs in WMT_PAIRS.items():
        for pair in pairs:
            a, b = pair.split("-")
            for src, tgt in ((a, b), (b, a)):
                name = f"{year}-{src}-{tgt}"
                out[name] = WmtSpec(name, f"wmt/{year}", pair, src, tgt)
    return out


def _offline_mode() -> bool:
    return any(os.environ.get(v, "").strip().upper() in ("1", "ON", "YES", "TRUE")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _unreachable(what: str, detail: str = "") -> DataError:
    return DataError(f"Cannot load {what}: the Hugging Face hub is unreachable{detail}. Use a local file "
                     "instead with the task `file:PATH` (CSV/TSV/JSONL with text+label, text_a+text_b+label "
                     "or source+target columns), or run where the hub can be reached.")


def _load_dataset(what: str, *args, **kwargs):
    """``datasets.load_dataset`` with a fast offline check and errors turned into DataError."""
    offline = _offline_mode()
    if not offline and not hub_probe.reachable():
        raise _unreachable(what, f" ({':'.join(map(str, hub_probe.target()))} did not answer within "
                                 f"{hub_probe.PROBE_SECONDS:g} s)")
    import datasets
    try:
        return datasets.load_dataset(*args, **kwargs)
    except (ConnectionError, TimeoutError, OSError) as exc:
        raise _unreachable(what, f" ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    except Exception as exc:                              # datasets raises many types; show what happened
        hint = " In offline mode only datasets already in the local cache can be read." if offline else ""
        first = str(exc).splitlines()[0].rstrip(".") if str(exc) else ""    # its own period would double ours
        raise DataError(f"Cannot load {what}: {type(exc).__name__}: {first}."
                        f"{hint} Use a local file with `file:PATH` instead.") from None


def glue_spec(name: str) -> GlueSpec:
    if name in REGRESSION:
        raise DataError(f"{name} ({REGRESSION[name]}) is a regression task; headprune handles classification and "
                        f"translation only. Choose another GLUE task: {', '.join(GLUE)}.")
    return GLUE[name]


def load_glue(name: str, split: str, limit: int | None = None) -> list[dict]:
    """Raw examples ``{"text", "label"}`` or ``{"text_a", "text_b", "label"}`` of a GLUE task."""
    spec = glue_spec(name)
    if split not in spec.splits:
        extra = " GLUE test labels are hidden; evaluate on validation." if split == "test" else ""
        raise DataError(f"GLUE {name} has no split {split!r}; use one of {', '.join(spec.splits)}.{extra}")
    hf_split = spec.splits[split] + (f"[:{int(limit)}]" if limit else "")
    ds = _load_dataset(f"GLUE {name} ({split})", GLUE_DATASET, name, split=hf_split)
    out = []
    for row in ds:
        label = int(row["label"])
        if label < 0:
            continue                                      # unlabeled row
        if len(spec.columns) == 1:
            out.append({"text": row[spec.columns[0]], "label": label})
        else:
            out.append({"text_a": row[spec.columns[0]], "text_b": row[spec.columns[1]], "label": label})
    return out


def load_wmt(name: str, split: str, limit: int | None = None) -> list[dict]:
    """Raw examples ``{"source", "target"}`` of a WMT pair, in the direction the name gives."""
    spec = wmt_names()[name]
    if split not in WMT_SPLITS:
        raise DataError(f"{name} has no split {split!r}; use one of {', '.join(WMT_SPLITS)}.")
    stream = split == "train"
    ds = _load_dataset(f"{name} ({split})", spec.dataset, spec.config, split=split, streaming=stream)
    out = []
    for row in ds:
        pair = row["translation"]
        out.append({"source": pair[spec.source_lang], "target": pair[spec.target_lang]})
        if limit and len(out) >= limit:
            break
    return out
