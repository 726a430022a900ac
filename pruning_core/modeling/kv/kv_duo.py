"""A KV policy in DuoAttention's attention-pattern form, written and read, so that it runs in their tools.

DuoAttention (Xiao et al. ICLR 2025, github.com/mit-han-lab/duo-attention) stores a pattern as a folder:

* ``full_attention_heads.tsv``: one line per layer, one tab-separated value per key/value head, in ``[0, 1]``
  (the trained gate α: 1 = the head needs the full cache, 0 = streaming is enough). Readers clip to ``[0, 1]``.
* ``config.json``: ``sink_size`` and ``recent_size`` (the streaming heads' sink and window, in tokens), beside
  the training settings; ``threshold`` (0.5) is the gate value below which a head streams at deployment.

kvpress's ``DuoAttentionPress`` loads them and streams the ``round(n x head_compression_ratio)`` lowest heads.
:func:`write` gives full heads 1.0 and streaming heads 0.0, so both rules stream exactly our heads; per-head
windows (budgets) have no DuoAttention form and are refused.
"""
from __future__ import annotations

import json
import math
import shutil
import tempfile
from pathlib import Path

from pruning_core.core.errors import FormatError
from pruning_core.modeling.kv.kv_policy import KVPolicy

PATTERN = "full_attention_heads.tsv"
CONFIG = "config.json"
THRESHOLD = 0.5


def pattern_text(policy: KVPolicy) -> str:
    """The ``full_attention_heads.tsv`` of ``policy``: 1.0 for a full head, 0.0 for a streaming one."""
    return "".join("\t".join("0.0" if s else "1.0" for s in row) + "\n" for row in policy.streaming)


def write(policy: KVPolicy, folder: str | Path, provenance: dict | None = None) -> Path:
    """Write ``policy`` as a DuoAttention pattern folder (created whole, or not at all; an existing folder
    must be empty)."""
    if policy.windows is not None and len({w for row in policy.windows for w in row if w}) > 1:
        raise FormatError("This policy gives its heads different windows (budgets): DuoAttention's pattern has one "
                          "sink and one recent size for every streaming head, so it cannot hold it.")
    if len(set(policy.kv_heads)) != 1:
        raise FormatError(f"DuoAttention's pattern has the same number of key/value heads in every layer; this policy "
                          f"has {list(policy.kv_heads)}.")
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise FormatError(f"{str(folder)!r} exists and is not an empty folder: name a new folder for the pattern.")
    window = policy.window if policy.windows is None else max(w for row in policy.windows for w in row)
    config = {"sink_size": policy.sink, "recent_size": window, "threshold": THRESHOLD,
              "headprune": {"n_streaming": policy.n_streaming, "n_heads": policy.n_heads,
                            "head_compression_ratio": policy.n_streaming / policy.n_heads,
                            "source": policy.source, "provenance": provenance or {}}}
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        (staging / PATTERN).write_text(pattern_text(policy), encoding="utf-8")
        (staging / CONFIG).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")
        if folder.exists():
            folder.rmdir()
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def _values(text: str, where: str) -> list[list[float]]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = [float(x) for x in line.strip().split("\t")]
        except ValueError:
            raise FormatError(f"{where} line {n} is not tab-separated numbers: {line[:60]!r}.") from None
        if any(math.isnan(x) for x in row):
            raise FormatError(f"{where} line {n} holds NaN.")
        rows.append([min(1.0, max(0.0, x)) for x in row])           # clipped to [0, 1], as DuoAttention reads it
    if not rows or len({len(r) for r in rows}) != 1:
        raise FormatError(f"{where} must hold one line per layer with the same number of key/value heads on each; "
                          f"it has {[len(r) for r in rows] or 'no lines'}.")
    return rows


def read(path: str | Path, *, stream: float | None = None, threshold: float = THRESHOLD, sink: int | None = None,
         window: int | None = None) -> KVPolicy:
    """A policy from a DuoAttention pattern: a folder (``full_attention_heads.tsv`` and ``config.json``), or the
    ``.tsv`` alone with ``sink`` and ``window``. Heads below ``threshold`` stream (DuoAttention's rule), or, with
    ``stream``, the ``round(n x stream)`` heads of lowest value (kvpress's rule; ties by position)."""
    path = Path(path)
    tsv = path / PATTERN if path.is_dir() else path
    if not tsv.is_file():
        raise FormatError(f"No DuoAttention pattern at {str(path)!r}: give its folder (with {PATTERN} and {CONFIG}) "
                          f"or the {PATTERN} file.")
    values = _values(tsv.read_text(encoding="utf-8"), str(tsv))
    config_file = tsv.parent / CONFIG
    if (sink is None or window is None) and config_file.is_file():
        try:
            config = json.loads(config_file.read_text(encoding="utf-8"))
            sink = int(config["sink_size"]) if sink is None else sink
            window = int(config["recent_size"]) if window is None else window
        except (ValueError, KeyError, TypeError) as exc:
            raise FormatError(f"{str(config_file)!r} has no usable sink_size and recent_size ({exc!r}).") from None
    if sink is None or window is None:
        raise FormatError(f"{str(tsv)!r} has no {CONFIG} beside it: give the sink and window sizes.")
    heads = [(l, j) for l, row in enumerate(values) for j in range(len(row))]
    if stream is None:
        chosen = {h for h in heads if values[h[0]][h[1]] < threshold}
        rule = {"threshold": threshold}
    else:
        if not 0.0 <= stream <= 1.0:
            raise FormatError(f"The streaming share must be between 0 and 1, got {stream}.")
        order = sorted(heads, key=lambda h: (values[h[0]][h[1]], h))
        chosen = set(order[:round(len(heads) * stream)])
        rule = {"fraction": stream}
    streaming = tuple(tuple((l, j) in chosen for j in range(len(row))) for l, row in enumerate(values))
    return KVPolicy(streaming, sink, window, {"method": "duo-attention", "file": str(tsv), **rule})
