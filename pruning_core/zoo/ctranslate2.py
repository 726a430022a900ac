"""A reader for CTranslate2 model files (``model.bin``), without the ctranslate2 package.

The format (binary version 6, little-endian), as CTranslate2's ``ModelSpec.save`` writes it:

- ``uint32`` binary version; then (version >= 2) the spec name as a *string* and ``uint32`` spec revision;
  a *string* is ``uint16`` byte count (terminating NUL included) + bytes;
- ``uint32`` number of variables, then per variable: name (*string*), ``uint8`` rank, ``rank`` x
  ``uint32`` dims, ``uint8`` dtype (:data:`DTYPES`), ``uint32`` byte count, the raw data (row-major);
- (version >= 3) ``uint32`` number of aliases, then per alias: alias name, target name (*strings*).

Scalars (rank 0) are settings such as ``decoder/num_heads``; aliases share a tensor
(``decoder/projection/weight`` -> ``decoder/embeddings/weight``).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch

from pruning_core.core.errors import FormatError

# CTranslate2's DataType enum (include/ctranslate2/types.h), in order
DTYPES: dict[int, np.dtype] = {0: np.dtype("<f4"), 1: np.dtype("i1"), 2: np.dtype("<i2"), 3: np.dtype("<i4"),
                               4: np.dtype("<f2")}
SUPPORTED_VERSIONS = range(3, 7)


@dataclass
class CT2Model:
    """The contents of one CTranslate2 file: spec name and revision, variables (tensors) and aliases."""

    spec: str
    revision: int
    version: int
    variables: dict[str, torch.Tensor] = field(repr=False)
    aliases: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> torch.Tensor:
        """The tensor ``name`` (an alias resolved); FormatError naming it when absent."""
        name = self.aliases.get(name, name)
        if name not in self.variables:
            raise FormatError(f"The CTranslate2 {self.spec} file has no variable {name!r}; it is not the "
                              "expected model (re-prepare it with --force).")
        return self.variables[name]

    def scalar(self, name: str) -> int:
        """A rank-0 setting as a Python int (``decoder/num_heads`` -> 8)."""
        return int(self.get(name).reshape(-1)[0])


def _read(f: BinaryIO, fmt: str) -> tuple:
    size = struct.calcsize("<" + fmt)
    raw = f.read(size)
    if len(raw) != size:
        raise FormatError("The CTranslate2 file ends early (truncated); re-prepare it with --force.")
    return struct.unpack("<" + fmt, raw)


def _string(f: BinaryIO) -> str:
    (n,) = _read(f, "H")
    return f.read(n).rstrip(b"\0").decode("utf-8")


def read_ct2(path: str | Path) -> CT2Model:
    """Read every variable of the CTranslate2 file ``path`` into CPU tensors of the stored dtype.

    Raises:
        FormatError: an unknown binary version or dtype, or a truncated file (the message names it).
    """
    path = Path(path)
    with open(path, "rb") as f:
        (version,) = _read(f, "I")
        if version not in SUPPORTED_VERSIONS:
            raise FormatError(f"{path} is CTranslate2 binary version {version}; this reader handles "
                              f"{SUPPORTED_VERSIONS.start}-{SUPPORTED_VERSIONS.stop - 1}. Use a file converted by "
                              "CTranslate2 3.x/4.x.")
        spec, revision = _string(f), _read(f, "I")[0]
        (count,) = _read(f, "I")
        variables: dict[str, torch.Tensor] = {}
        for _ in range(count):
            name = _string(f)
            (rank,) = _read(f, "B")
            dims = _read(f, "I" * rank) if rank else ()
            (dtype_id,) = _read(f, "B")
            (nbytes,) = _read(f, "I")
            if dtype_id not in DTYPES:
                raise FormatError(f"{path}: variable {name!r} has CTranslate2 dtype {dtype_id}, which this reader "
                                  "does not handle (float32, int8, int16, int32, float16 only).")
            data = f.read(nbytes)
            dtype = DTYPES[dtype_id]
            if len(data) != nbytes or nbytes != dtype.itemsize * int(np.prod(dims, dtype=np.int64)):
                raise FormatError(f"{path}: variable {name!r} (dims {dims}) has {len(data)} bytes of data, "
                                  f"expected {nbytes}; the file is truncated or corrupt.")
            variables[name] = torch.from_numpy(np.frombuffer(data, dtype=dtype).reshape(dims).copy())
        aliases = {}
        (n_alias,) = _read(f, "I")
        for _ in range(n_alias):
            alias = _string(f)
            aliases[alias] = _string(f)
    return CT2Model(spec=spec, revision=revision, version=version, variables=variables, aliases=aliases)
