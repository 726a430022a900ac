"""A reader for Marian's binary model format (version 1), as Bergamot's student models ship it.

Layout (little-endian): ``uint64 version, uint64 n``; ``n`` headers of four ``uint64`` (name length with its
NUL, type, shape rank, data bytes); the names; the shapes (``int32``); ``uint64 p`` and ``p`` padding bytes;
each tensor's data in header order (possibly padded to 256-byte alignment). Types: ``0x0404`` float32 and
``0x4101`` "intgemm8" (int8 values, then one float32 multiplier: value = int8 / multiplier; a weight
``[in, out]`` is stored transposed, the embedding ``Wemb`` as it is). ``*_QuantMultA`` entries are skipped;
``special:model.yml`` is kept as text in :attr:`MarianModel.config_text`.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pruning_core.core.errors import FormatError

VERSION = 1
FLOAT32 = 0x0404
INTGEMM8 = 0x4101
NOT_TRANSPOSED = ("Wemb",)             # int8 matrices stored in their logical layout


@dataclass(frozen=True)
class MarianModel:
    """The tensors of one Marian binary, dequantised to float32 in their logical shapes."""

    path: Path
    tensors: dict[str, np.ndarray] = field(repr=False)    # name -> float32 array, logical shape
    types: dict[str, int] = field(repr=False)             # name -> Marian type code as stored
    config_text: str = ""                                 # special:model.yml, "" when absent

    def get(self, name: str) -> np.ndarray:
        """The tensor ``name``; FormatError naming the file when it is not there."""
        if name not in self.tensors:
            raise FormatError(f"{self.path} has no tensor {name!r}: it is not the Marian model this reader expects. "
                              "Delete it and prepare again (with --force).")
        return self.tensors[name]


def _fail(path: Path, why: str) -> FormatError:
    return FormatError(f"{path} is not a readable Marian binary model ({why}): the file is cut or altered. "
                       "Delete it and prepare again (with --force).")


def read_marian(path: str | Path) -> MarianModel:
    """Read the Marian binary at ``path`` (see the module docstring for the format).

    Raises:
        FormatError: a wrong version, a cut file, an unknown type or a size that does not fit; the message
            names the file and says to prepare again.
    """
    path = Path(path)
    data = path.read_bytes()
    if len(data) < 16:
        raise _fail(path, f"{len(data)} bytes, shorter than its 16-byte header")
    version, n = struct.unpack_from("<QQ", data, 0)
    if version != VERSION:
        raise _fail(path, f"version {version}, expected {VERSION}")
    offset = 16
    if offset + 32 * n > len(data):
        raise _fail(path, f"{n} tensor headers do not fit in {len(data):,} bytes")
    headers = np.frombuffer(data, dtype="<u8", count=4 * n, offset=offset).reshape(n, 4).astype(np.int64)
    offset += 32 * n
    names = []
    for name_len in headers[:, 0]:
        raw = data[offset:offset + name_len]
        if len(raw) != name_len or not raw.endswith(b"\0"):
            raise _fail(path, "a tensor name is cut")
        names.append(raw[:-1].decode("utf-8", errors="replace"))
        offset += int(name_len)
    shapes = []
    for dims in headers[:, 2]:
        if offset + 4 * dims > len(data):
            raise _fail(path, "the tensor shapes are cut")
        shapes.append(tuple(int(d) for d in np.frombuffer(data, dtype="<i4", count=int(dims), offset=offset)))
        offset += 4 * int(dims)
    if offset + 8 > len(data):
        raise _fail(path, "the padding length is cut")
    offset += 8 + struct.unpack_from("<Q", data, offset)[0]
    end = offset + int(headers[:, 3].sum())
    if end != len(data):
        raise _fail(path, f"its headers describe {end:,} bytes but it has {len(data):,}")

    tensors: dict[str, np.ndarray] = {}
    types: dict[str, int] = {}
    config_text = ""
    for name, (_, kind, _, size), shape in zip(names, headers, shapes):
        chunk = data[offset:offset + size]
        offset += int(size)
        if name.startswith("special:"):
            if name == "special:model.yml":
                config_text = chunk.rstrip(b"\0").decode("utf-8", errors="replace")
            continue
        if name.endswith("_QuantMultA"):
            continue
        tensors[name] = _decode(path, name, int(kind), shape, chunk)
        types[name] = int(kind)
    return MarianModel(path, tensors, types, config_text)


def _decode(path: Path, name: str, kind: int, shape: tuple[int, ...], chunk: bytes) -> np.ndarray:
    count = int(np.prod(shape)) if shape else 1
    if kind == FLOAT32:
        if len(chunk) < 4 * count:
            raise _fail(path, f"{name} holds {len(chunk)} bytes, fewer than its {count} float32 values")
        return np.frombuffer(chunk, dtype="<f4", count=count).reshape(shape).astype(np.float32)
    if kind == INTGEMM8:
        if len(chunk) < count + 4:
            raise _fail(path, f"{name} holds {len(chunk)} bytes, fewer than its {count} int8 values and multiplier")
        values = np.frombuffer(chunk, dtype=np.int8, count=count).astype(np.float32)
        multiplier = float(np.frombuffer(chunk, dtype="<f4", count=1, offset=count)[0])
        if not np.isfinite(multiplier) or multiplier == 0:
            raise _fail(path, f"{name} has the quantisation multiplier {multiplier}")
        values /= multiplier
        if len(shape) == 2 and name not in NOT_TRANSPOSED:
            return np.ascontiguousarray(values.reshape(shape[1], shape[0]).T)   # stored [out, in] -> [in, out]
        return values.reshape(shape)
    raise _fail(path, f"{name} has the type 0x{kind:04x}; only float32 (0x0404) and intgemm8 (0x4101) are read")
