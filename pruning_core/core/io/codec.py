"""A generic JSON codec for frozen dataclasses: field order is key order, no per-field code.

A :class:`JsonRecord` dataclass is written field by field in declaration order. Field metadata adjusts the
key: ``json`` renames it, ``flatten`` merges a nested record's keys (or a mapping's, read back as the keys no
other field names) into the parent, ``omit`` leaves a field out of the file, ``decode`` gives the function
that reads a non-dataclass value (``HeadMask.from_lists``). Derived values and a file's ``format`` are
``init=False`` fields: written, never read (``__post_init__`` fills derived ones with
:meth:`JsonRecord._derive`); a record with a ``format`` field checks a file's format before reading it.
Decoding follows the type hints: ``int``/``float``/``str``/``bool``, ``X | None``, tuples, ``Mapping`` and
nested records; unknown keys are ignored and a missing key with a default takes the default.

:data:`FORMATS` names every ``headprune.*`` format, each spelled once, below.
"""
from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from typing import Any, ClassVar, TypeVar

from pruning_core.core.errors import FormatError

R = TypeVar("R", bound="JsonRecord")
T = TypeVar("T")

FORMATS: dict[str, str] = {}          # "headprune.<name>/<version>" -> what a file of that format holds


def _format(name: str, version: int, holds: str) -> str:
    """Register the format ``headprune.<name>/<version>``; a file names it in its ``"format"`` field."""
    fmt = f"headprune.{name}/{version}"
    if any(f.rpartition("/")[0] == f"headprune.{name}" for f in FORMATS):
        raise ValueError(f"the format {name!r} is registered twice")
    FORMATS[fmt] = holds
    return fmt


def format_family(fmt: str) -> str:
    """``"headprune.mask/"`` of ``"headprune.mask/1"``: what every version of the format starts with."""
    return fmt.rpartition("/")[0] + "/"


# -- results of the library (evaluation, scoring, analysis, compress, bench, export) --
MASK_FORMAT = _format("mask", 1, "a head mask: 1 keep, 0 remove, per kind and layer")
SCORES_FORMAT = _format("scores", 1, "head importance scores of one method")
EVAL_FORMAT = _format("eval", 1, "one evaluation: metric, interval, loss, per-example results")
ABLATION_FORMAT = _format("ablation", 1, "each head removed alone: the metric without it")
ONE_PER_LAYER_FORMAT = _format("one_per_layer", 1, "the metric with one head kept per layer")
CURVE_FORMAT = _format("curve", 1, "the metric as heads are removed in a scorer's order")
KINDS_FORMAT = _format("kinds", 1, "which kind of attention a task needs most")
DYNAMICS_FORMAT = _format("dynamics", 1, "head importance and pruning tolerance while a model is fine-tuned")
ROLES_FORMAT = _format("roles", 1, "each head's role scores (previous token, induction, ...)")
VERIFY_FORMAT = _format("verify", 1, "a scorer's estimates checked against exact ablation")
COMPRESS_FORMAT = _format("compress", 1, "a retraining-free compression run, end to end")
BENCH_FORMAT = _format("bench", 1, "latency and throughput of a model with and without a mask")
ONNX_BENCH_FORMAT = _format("onnx_bench", 1, "dense and pruned latency in ONNX Runtime beside PyTorch")
INFO_FORMAT = _format("info", 1, "a model's architecture and head layout (headprune info)")
KV_POLICY_FORMAT = _format("kv_policy", 1, "per key/value head: full cache, or sink + recent window (streaming)")
LONG_CONTEXT_CURVES_FORMAT = _format("long_context_curves", 1, "accuracy against the share of key/value heads streaming, per policy")
CAUSAL_FORMAT = _format("causal", 1, "top heads by a score removed against random heads: accuracy, paired tests")
# -- SMP --
SMP_PRUNER_FORMAT = _format("smp_pruner", 1, "a trained SMP pruner's configuration")
SMP_TRAIN_FORMAT = _format("smp_train", 1, "what headprune smp train did")
SMP_COMPARE_FORMAT = _format("smp_compare", 1, "single-shot pruning before fine-tuning: five conditions side by side")
SMP_SOURCES_FORMAT = _format("smp_sources", 1, "the manifest of SMP's unlabeled training texts")
# -- manifests of prepared data and models --
DATA_FORMAT = _format("data", 2,                   # 2: splits ordered by sha256(id), not file order
                      "the manifest of the movie-sentiment data")
RULER_FORMAT = _format("data/ruler", 1, "the manifest of the RULER word lists")
SPEECH_FORMAT = _format("speech", 1, "the manifest of prepared speech data")
BIBLE_FORMAT = _format("bible", 1, "the manifest of the English-Portuguese Bible verse pairs")
DEFAULT_FORMAT = _format("default", 1, "the manifest of the prepared default model")
MPNET_FORMAT = _format("mpnet", 1, "the manifest of the prepared MPNet model")
WHISPER_FORMAT = _format("whisper", 1, "the manifest of the prepared Whisper model")
BERGAMOT_FORMAT = _format("bergamot", 1, "the manifest of a prepared Bergamot translation model")
SMOLLM2_FORMAT = _format("smollm2", 1, "the manifest of the prepared SmolLM2 model")
QWEN_FORMAT = _format("qwen2.5-0.5b", 1, "the manifest of the prepared Qwen2.5-0.5B model")
# -- the dashboard --
ANALYSIS_FORMAT = _format("analysis", 1, "the dashboard's analysis bundle (mask, scores, results)")


def loads(text: str | bytes, where: str = "the file") -> Any:
    """The JSON value in ``text``, else a :class:`FormatError` naming ``where``: text cut off or edited, not
    UTF-8, a number of more digits than Python reads (4,300), or nesting deeper than its stack."""
    try:
        return json.loads(text)
    except RecursionError:
        raise FormatError(f"{where} nests lists or objects too deeply to read; it was not written by headprune. "
                          "Write it again with headprune.") from None
    except ValueError as exc:                 # JSONDecodeError, UnicodeDecodeError, int() past 4,300 digits
        raise FormatError(f"{where} is not valid JSON ({str(exc)[:200]}). Was it cut off or edited by hand? "
                          "Write it again with headprune.") from None


def check_format(data: Any, expected: str | None, where: str = "the file") -> dict:
    """``data`` if it is a headprune document of format ``expected`` (any format when None), else a
    :class:`FormatError` that names what the file is and what is needed."""
    wanted = f"a {expected!r} file" if expected else "a file that headprune wrote"
    if not isinstance(data, dict) or "format" not in data:
        raise FormatError(f"{where} is not a headprune file: it has no 'format' field. Give {wanted}.")
    if not isinstance(data["format"], str):
        raise FormatError(f"{where} has format {str(data['format'])[:40]!r}, not a format name. Give {wanted}.")
    if expected is not None:
        name, _, version = data["format"].rpartition("/")
        want_name, _, want_version = expected.rpartition("/")
        if name != want_name:
            raise FormatError(f"{where} is a {data['format'][:60]!r} file, but a {expected!r} file is needed here. "
                              f"Give {wanted}.")
        if want_version and version != want_version:
            raise FormatError(f"{where} has format version {version[:20]!r}; this headprune reads version "
                              f"{want_version!r}. Re-create the file with this version of headprune.")
    return data


def read_document(raw: str | bytes, reader: Callable[[Any], T], where: str) -> T:
    """``reader`` applied to the JSON in ``raw`` (an upload's bytes): any failure, of the JSON or of what it
    holds, becomes one :class:`FormatError` that names ``where`` and says what to do."""
    data = loads(raw, where)
    try:
        return reader(data)
    except FormatError as exc:
        message = str(exc)
        raise FormatError(message if where in message else f"{where}: {message}") from None
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as exc:
        raise FormatError(f"{where} is malformed ({type(exc).__name__}: {str(exc)[:120]}). Write it again with "
                          "headprune.") from None


OMIT = {"omit": True}    # field metadata: kept in memory, not written (a run's per-step losses)


def json_field(key: str) -> dict:
    """Field metadata renaming the JSON key: ``field(metadata=json_field("median_s"))``."""
    return {"json": key}


def encode(value: Any) -> Any:
    """A JSON-ready copy of ``value`` (records by field, ``to_json()`` objects, mappings, sequences)."""
    if isinstance(value, JsonRecord):
        out: dict[str, Any] = {}
        for f in fields(value):
            if f.metadata.get("omit"):
                continue
            encoded = encode(getattr(value, f.name))
            if f.metadata.get("flatten"):
                out.update(encoded)
            else:
                out[f.metadata.get("json", f.name)] = encoded
        return out
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(cls: type[R], data: Mapping) -> R:
    """Build ``cls`` from what :func:`encode` wrote (raises KeyError/TypeError/ValueError/ArithmeticError if
    malformed: :meth:`JsonRecord.from_json` turns them into a FormatError)."""
    hints = typing.get_type_hints(cls)
    claimed = {f.metadata.get("json", f.name) for f in fields(cls) if not f.metadata.get("flatten")}
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if not f.init or f.metadata.get("omit"):
            continue
        if f.metadata.get("flatten"):             # a record reads its own keys; a mapping the keys left over
            hint = hints[f.name]
            flat_record = typing.get_origin(hint) is None and isinstance(hint, type) and issubclass(hint, JsonRecord)
            raw = data if flat_record else {k: v for k, v in data.items() if k not in claimed}
        else:
            key = f.metadata.get("json", f.name)
            if key not in data and (f.default is not MISSING or f.default_factory is not MISSING):
                continue
            raw = data[key]
        reader = f.metadata.get("decode")
        kwargs[f.name] = reader(raw) if reader is not None else _value(hints[f.name], raw)
    return cls(**kwargs)


def _value(tp: Any, raw: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        return _value(next(a for a in args if a is not type(None)), raw)
    if tp is tuple:                           # a bare ``tuple``: its items as JSON gave them, lists as tuples
        return tuple(tuple(r) if isinstance(r, list) else r for r in raw)
    if origin is tuple:
        if len(args) == 2 and args[1] is not Ellipsis:
            return tuple(_value(a, r) for a, r in zip(args, raw, strict=True))
        return tuple(_value(args[0], r) for r in raw)
    if tp is Mapping or origin is Mapping or tp is dict or origin is dict:
        return dict(raw or {})
    if isinstance(tp, type) and issubclass(tp, JsonRecord):
        return decode(tp, raw)
    if tp in (int, float, str, bool):
        return tp(raw)
    raise TypeError(f"no JSON reader for {tp!r}")


class JsonRecord:
    """Mixin for frozen dataclasses written and read by this codec."""

    _malformed: ClassVar[str] = "A JSON block is malformed"

    def to_json(self) -> dict:
        return encode(self)

    @classmethod
    def from_json(cls: type[R], data: Mapping) -> R:
        fmt = next((f.default for f in fields(cls) if f.name == "format"), None)
        if isinstance(fmt, str):
            check_format(data, fmt)
        try:
            return decode(cls, data)
        except FormatError as exc:                # a nested value's own check (a mask's 0/1)
            raise FormatError(f"{cls._malformed} ({exc})") from None
        except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as exc:
            raise FormatError(f"{cls._malformed} ({type(exc).__name__}: {str(exc)[:120]}).") from None

    def _derive(self, **values: Any) -> None:
        """Set ``init=False`` fields of a frozen dataclass (call from ``__post_init__``)."""
        for name, value in values.items():
            object.__setattr__(self, name, value)
