"""The Marian binary reader on small files written here (float32, intgemm8, transposition, cut files)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from pruning_core.core.errors import FormatError, HeadpruneError
from pruning_core.zoo.marian_binary import FLOAT32, INTGEMM8, read_marian

YAML = b"type: transformer\ndec-cell: ssru\n"


def write_marian(path: Path, entries: list[tuple[str, int, tuple[int, ...], bytes]], version: int = 1) -> Path:
    """A Marian binary of ``entries`` (name, type, shape, data bytes), each padded to 256 bytes as Marian does."""
    padded = [(n, t, s, d + b"\0" * (-len(d) % 256)) for n, t, s, d in entries]
    out = struct.pack("<QQ", version, len(padded))
    for name, kind, shape, data in padded:
        out += struct.pack("<QQQQ", len(name) + 1, kind, len(shape), len(data))
    out += b"".join(n.encode() + b"\0" for n, *_ in padded)
    out += b"".join(struct.pack(f"<{len(s)}i", *s) for _, _, s, _ in padded)
    pad = -(len(out) + 8) % 256                  # the tensor data starts 256-aligned
    out += struct.pack("<Q", pad) + b"\0" * pad
    out += b"".join(d for *_, d in padded)
    path.write_bytes(out)
    return path


def int8_entry(name: str, stored: np.ndarray, multiplier: float, shape: tuple[int, int]):
    """An intgemm8 entry: ``stored`` int8 bytes (already in Marian's storage order), then the multiplier."""
    return (name, INTGEMM8, shape, stored.astype(np.int8).tobytes() + struct.pack("<f", multiplier))


@pytest.fixture
def small(tmp_path) -> tuple[Path, dict]:
    rng = np.random.default_rng(0)
    w_logical = rng.integers(-127, 128, size=(3, 5)).astype(np.int8)        # [in 3, out 5]
    emb = rng.integers(-127, 128, size=(4, 3)).astype(np.int8)              # [vocab 4, dim 3]
    bias = rng.standard_normal((1, 5)).astype(np.float32)
    entries = [
        ("Wemb", INTGEMM8, (4, 3), emb.tobytes() + struct.pack("<f", 8.0)),
        ("Wemb_QuantMultA", INTGEMM8, (1, 1), struct.pack("<f", 1.0)),
        int8_entry("encoder_l1_self_Wq", w_logical.T.copy(), 4.0, (3, 5)),  # stored transposed
        ("encoder_l1_self_Wq_QuantMultA", FLOAT32, (1, 1), struct.pack("<f", 2.0)),
        ("encoder_l1_self_bq", FLOAT32, (1, 5), bias.tobytes()),
        ("special:model.yml", 0x0101, (len(YAML),), YAML),
    ]
    path = write_marian(tmp_path / "model.bin", entries)
    return path, {"w": w_logical / 4.0, "emb": emb / 8.0, "bias": bias}


def test_reads_both_types_transposes_matrices_not_the_embedding(small):
    path, want = small
    model = read_marian(path)
    assert set(model.tensors) == {"Wemb", "encoder_l1_self_Wq", "encoder_l1_self_bq"}   # QuantMultA, special: skipped
    assert model.get("encoder_l1_self_Wq").shape == (3, 5)
    np.testing.assert_array_equal(model.get("encoder_l1_self_Wq"), want["w"].astype(np.float32))
    np.testing.assert_array_equal(model.get("Wemb"), want["emb"].astype(np.float32))
    np.testing.assert_array_equal(model.get("encoder_l1_self_bq"), want["bias"])
    assert model.types["Wemb"] == INTGEMM8 and model.types["encoder_l1_self_bq"] == FLOAT32
    assert model.config_text == YAML.decode()
    assert all(t.dtype == np.float32 for t in model.tensors.values())


def test_a_missing_tensor_names_the_file(small):
    path, _ = small
    with pytest.raises(FormatError, match="no tensor 'decoder_l1_rnn_W'.*prepare again"):
        read_marian(path).get("decoder_l1_rnn_W")


@pytest.mark.parametrize("keep", [0, 10, 100, -1])
def test_a_cut_file_raises_one_project_error_naming_it(small, tmp_path, keep):
    path, _ = small
    data = path.read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(data[:keep] if keep >= 0 else data[:-1])
    with pytest.raises(HeadpruneError) as info:
        read_marian(cut)
    assert str(cut) in str(info.value) and "prepare again" in str(info.value)


def test_an_extra_byte_is_refused(small, tmp_path):
    path, _ = small
    longer = tmp_path / "longer.bin"
    longer.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(FormatError, match="headers describe"):
        read_marian(longer)


def test_a_bad_version_is_refused(tmp_path):
    path = write_marian(tmp_path / "v2.bin", [("b", FLOAT32, (1,), struct.pack("<f", 1.0))], version=2)
    with pytest.raises(FormatError, match="version 2, expected 1"):
        read_marian(path)


def test_an_unknown_type_and_a_zero_multiplier_are_refused(tmp_path):
    half = write_marian(tmp_path / "half.bin", [("b", 0x0402, (2,), b"\0" * 4)])
    with pytest.raises(FormatError, match="type 0x0402"):
        read_marian(half)
    zero = write_marian(tmp_path / "zero.bin", [int8_entry("W", np.ones((2, 2)), 0.0, (2, 2))])
    with pytest.raises(FormatError, match="multiplier 0.0"):
        read_marian(zero)
