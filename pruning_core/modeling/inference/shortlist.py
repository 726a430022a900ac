"""Marian's binary vocabulary shortlist (``lex.*.s2t.bin``): the target pieces a translation may use, per source piece.

Bergamot deploys its students with one: per source piece, the ``bestNum`` target pieces most often aligned to
it, plus the ``firstNum`` most frequent ids, always allowed; decoding then scores only those
(:func:`pruning_core.modeling.inference.greedy.greedy_decode`'s ``allowed``). The file (Marian's
``BinaryShortlistGenerator``, little-endian) is a header of six uint64, the uint64 ``wordToOffset`` array and
the uint32 ``shortLists`` array; its checksum is Marian's ``hashMem``. A sentence's allowed ids are computed
as Marian does for that sentence alone (its pieces' lists, the source pieces themselves with a shared
vocabulary, padded to a multiple of 8), so a translation does not depend on its batch neighbours.
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from pruning_core.core.errors import FormatError
from pruning_core.modeling.inference.greedy import AllowedIds

SHORTLIST_FILE = "shortlist.s2t.bin"      # its name in a prepared model folder (load_model reads it when there)
MAGIC = 0xF11A48D5013417F5
HEADER = 6                       # uint64 fields
_MASK64 = (1 << 64) - 1


def marian_checksum(words: np.ndarray) -> int:
    """Marian's ``util::hashMem<uint64_t, uint64_t>``: ``seed ^= w + 0x9e3779b9 + (seed << 6) + (seed >> 2)``."""
    seed = 0
    for w in words.tolist():
        seed ^= (w + 0x9E3779B9 + ((seed << 6) & _MASK64) + (seed >> 2)) & _MASK64
    return seed


@dataclass(frozen=True, eq=False)
class Shortlist:
    """A read shortlist: ``offsets`` ``[sources + 1]``, ``targets`` ``[entries]``, and where it came from
    (compared by identity: one read per file, cached)."""

    path: str
    sha256: str
    first_num: int
    best_num: int
    offsets: np.ndarray = field(repr=False)
    targets: np.ndarray = field(repr=False)
    shared_vocab: bool = True

    @property
    def n_sources(self) -> int:
        return len(self.offsets) - 1

    def describe(self) -> dict:
        """What results record of it: file, hash and sizes."""
        return {"file": Path(self.path).name, "sha256": self.sha256, "first_num": self.first_num,
                "best_num": self.best_num, "per_sentence": True}

    def row_ids(self, source_ids: list[int], vocab: int) -> np.ndarray:
        """Sorted target ids one sentence (its source piece ids) may produce, below ``vocab``."""
        allowed = np.zeros(vocab, dtype=bool)
        allowed[:min(self.first_num, vocab)] = True
        for s in set(source_ids):
            if 0 <= s < self.n_sources:
                allowed[self.targets[self.offsets[s]:self.offsets[s + 1]]] = True
                if self.shared_vocab and s < vocab:
                    allowed[s] = True
        missing = int(-allowed.sum() % 8)
        if missing:
            free = np.flatnonzero(~allowed[self.first_num:])[:missing] + self.first_num
            allowed[free] = True
        return np.flatnonzero(allowed)

    def allowed(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, vocab: int) -> AllowedIds:
        """Each row's allowed ids for a batch ``[B, S]`` (padding left out), as one union and a row mask."""
        rows = [self.row_ids(ids[mask.bool()].tolist(), vocab) for ids, mask in zip(input_ids, attention_mask)]
        union = np.unique(np.concatenate(rows))
        row_mask = np.zeros((len(rows), len(union)), dtype=bool)
        for b, ids in enumerate(rows):
            row_mask[b, np.searchsorted(union, ids)] = True
        device = input_ids.device
        return AllowedIds(torch.from_numpy(union).long().to(device), torch.from_numpy(row_mask).to(device))


def read_shortlist(path: str | Path, fix: str = "prepare the model again with --force") -> Shortlist:
    """Read and check a binary shortlist; a cut or altered file raises one :class:`FormatError` naming it and ``fix``."""
    return _read(str(Path(path).resolve()), fix)


@functools.lru_cache(maxsize=8)
def _read(path: str, fix: str) -> Shortlist:
    def bad(why: str) -> FormatError:
        return FormatError(f"The vocabulary shortlist {path} is cut or altered ({why}); {fix}.")

    try:
        blob = Path(path).read_bytes()
    except OSError as exc:
        raise FormatError(f"Cannot read the vocabulary shortlist {path} ({exc.strerror}); {fix}.") from None
    if len(blob) < HEADER * 8:
        raise bad(f"{len(blob)} bytes, shorter than its header")
    magic, checksum, first_num, best_num, n_offsets, n_targets = np.frombuffer(blob[:HEADER * 8], "<u8").tolist()
    if magic != MAGIC:
        raise bad("not a Marian binary shortlist: wrong magic number")
    expected = HEADER * 8 + n_offsets * 8 + n_targets * 4
    if expected != len(blob):
        raise bad(f"its header promises {expected} bytes, the file has {len(blob)}")
    if marian_checksum(np.frombuffer(blob[16:16 + (len(blob) - 16) // 8 * 8], "<u8")) != checksum:
        raise bad("its checksum does not match")
    offsets = np.frombuffer(blob, "<u8", n_offsets, HEADER * 8).astype(np.int64)
    targets = np.frombuffer(blob, "<u4", n_targets, HEADER * 8 + n_offsets * 8).astype(np.int64)
    if n_offsets < 1 or offsets[0] != 0 or offsets[-1] != n_targets or np.any(np.diff(offsets) < 0):
        raise bad("its offsets are not increasing from 0 to its size")
    return Shortlist(path, hashlib.sha256(blob).hexdigest(), int(first_num), int(best_num), offsets, targets)
