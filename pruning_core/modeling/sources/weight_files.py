"""Checks of a local model folder's weight files, so that a damaged folder gives one clear error naming the
file and what to do instead of a traceback from deep inside safetensors or transformers.

Three ways a folder is found broken, each a :class:`~pruning_core.core.errors.ModelLoadError`:

- a ``*.safetensors`` file cut off (an interrupted copy or download): its header says how many bytes of
  tensors follow, the file holds fewer (checked from the header alone, before loading: 8 bytes of header
  length, the JSON header, then the tensors' data);
- a shard missing from a sharded checkpoint: ``model.safetensors.index.json`` names a file that is absent;
- a ``config.json`` that does not match its weights: a tensor's shape in the file differs from the shape
  the config builds (found after transformers refused the load, by building the model on the meta device).
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

from pruning_core.core.errors import ModelLoadError

INDEX = "model.safetensors.index.json"

__all__ = ["INDEX", "check_weight_files", "explain_mismatch", "safetensors_shapes"]


def check_weight_files(folder: Path) -> None:
    """Raise a ModelLoadError naming the file when a shard the index names is missing or a
    ``*.safetensors`` file in ``folder`` is cut off or has an unreadable header. Reads headers only."""
    index = folder / INDEX
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ModelLoadError(f"The checkpoint index {str(index)!r} is not valid JSON with a 'weight_map'; it "
                                 "was cut off or edited. Copy or download the model folder again.") from None
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise ModelLoadError(
                f"The checkpoint index {str(index)!r} names {len(names)} shard(s), but {missing[0]!r}"
                f"{f' and {len(missing) - 1} more are' if len(missing) > 1 else ' is'} missing from "
                f"{str(folder)!r}: the copy or download stopped early. Copy or download every shard again.")
    for path in sorted(folder.glob("*.safetensors")):
        _check_safetensors(path)


def _header(path: Path) -> tuple[dict, int]:
    """The JSON header of a safetensors file and the bytes it says the file has (8 + header + data)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ModelLoadError(_cut_off(path, size, None))
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise ModelLoadError(_cut_off(path, size, None))
        try:
            header = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            raise ModelLoadError(f"The weights file {str(path)!r} has an unreadable header: it is not a complete "
                                 "safetensors file. Copy or download it again, or save the model again.") from None
    ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)]
    return header, 8 + n + max(ends, default=0)


def _check_safetensors(path: Path) -> None:
    size = path.stat().st_size
    _, expected = _header(path)
    if size < expected:
        raise ModelLoadError(_cut_off(path, size, expected))


def _cut_off(path: Path, size: int, expected: int | None) -> str:
    says = f", its header describes {expected:,}" if expected else ""
    return (f"The weights file {str(path)!r} is cut off ({size:,} bytes{says}): it was not copied, downloaded "
            "or saved completely. Copy or download it again, or save the model again.")


def safetensors_shapes(folder: Path) -> dict[str, tuple[tuple[int, ...], str]]:
    """Every tensor in the folder's ``*.safetensors`` files: name -> (shape, file name), from the headers."""
    shapes: dict[str, tuple[tuple[int, ...], str]] = {}
    for path in sorted(folder.glob("*.safetensors")):
        header, _ = _header(path)
        for name, info in header.items():
            if name != "__metadata__" and isinstance(info, dict):
                shapes[name] = (tuple(int(d) for d in info["shape"]), path.name)
    return shapes


def explain_mismatch(model_shapes: dict[str, tuple[int, ...]], folder: Path) -> str | None:
    """A sentence naming the first tensor whose shape in the folder's weights differs from the shape the
    config builds (``model_shapes``: state-dict name -> shape), or None when every shared name agrees.

    Checkpoints may name tensors with or without the base model's prefix (``bert.``, ``model.``), so a
    name is matched on its longest suffix present in both."""
    files = safetensors_shapes(folder)
    by_suffix = {name: name for name in model_shapes}
    for name, shape in model_shapes.items():
        parts = name.split(".")
        for i in range(1, len(parts)):
            by_suffix.setdefault(".".join(parts[i:]), name)
    for name, (shape, file_name) in files.items():
        target = by_suffix.get(name)
        if target is not None and tuple(model_shapes[target]) != shape:
            return (f"config.json does not match the weights in {file_name}: {name} is {list(shape)} there, but the "
                    f"config builds {list(model_shapes[target])}. The config was edited or belongs to another "
                    f"checkpoint; put back the config.json saved with these weights.")
    return None
