"""Any speech listing (``--task speech:PATH``: a JSONL or TSV listing, or a folder of ``NAME.wav`` + ``NAME.txt``)
and any audio file it names, however broken, is read or refused with a :class:`HeadpruneError` that names the
file and says what to do: never ``json``'s, ``wave``'s or ``pathlib``'s own error."""
from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bad_inputs import EDGE_TEXT, FUZZ, assert_clear, json_values, mutated_json, mutated_text
from pruning_core.tasks.data import speech

ROWS = [{"audio": "a.wav", "text": "a fine film"}, {"audio": "b.wav", "text": "dull, and long"}]
WAV = speech.encode_wav(np.sin(np.linspace(0, 200, 1600)).astype(np.float32) * 0.5)
fields = st.sampled_from(EDGE_TEXT + ["a.wav", "/", ".", "..", "missing.wav", "a\x00.wav", "b.wav\t", "\ud800.wav"]) \
    | st.text(max_size=12) | json_values


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech")
    for name in ("a", "b"):
        (root / f"{name}.wav").write_bytes(WAV)
    return root


@st.composite
def jsonl_listings(draw) -> str:
    lines = [json.dumps(r) for r in ROWS]
    i = draw(st.sampled_from(range(len(lines))))
    if draw(st.booleans()):
        row = dict(ROWS[i])
        row[draw(st.sampled_from(["audio", "text"]))] = draw(fields)
        lines[i] = json.dumps(row, allow_nan=True, ensure_ascii=False)
    else:
        lines[i] = json.dumps(draw(mutated_json(ROWS[i]) | json_values), allow_nan=True, ensure_ascii=False)
    text = "\n".join(lines) + "\n"
    return draw(st.just(text) | mutated_text(text))


@st.composite
def tsv_listings(draw) -> str:
    rows = [["audio", "text"]] + [[r["audio"], r["text"]] for r in ROWS]
    if draw(st.booleans()):
        rows[draw(st.integers(0, 2))][draw(st.integers(0, 1))] = draw(st.sampled_from(EDGE_TEXT) | st.text(max_size=12))
    text = "\n".join("\t".join(r) for r in rows) + "\n"
    return draw(st.just(text) | mutated_text(text))


def _read_all(listing: str) -> None:
    """What ``speech:PATH`` does: the listing, then every audio file it names."""
    for row in speech.load_listing(listing):
        speech.read_wav(row["audio"])


@FUZZ
@given(st.sampled_from([".jsonl", ".tsv"]).flatmap(
    lambda suffix: st.tuples(st.just(suffix), jsonl_listings() if suffix == ".jsonl" else tsv_listings())))
def test_any_listing_is_read_or_refused_clearly(folder, listing):
    suffix, text = listing
    path = folder / f"listing{suffix}"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert_clear(lambda: _read_all(str(path)), "listing")


@FUZZ
@given(st.binary(max_size=64) | st.integers(0, len(WAV)).map(lambda n: WAV[:n])
       | st.tuples(st.integers(0, 43), st.binary(min_size=1, max_size=4)).map(
           lambda at: WAV[:at[0]] + at[1] + WAV[at[0] + len(at[1]):]))
def test_any_audio_file_is_read_or_refused_clearly(folder, data):
    path = folder / "c.wav"
    path.write_bytes(data)
    assert_clear(lambda: speech.read_wav(path), "c.wav")


@FUZZ
@given(st.binary(max_size=40))
def test_a_folder_transcript_in_any_bytes_is_read_or_refused_clearly(tmp_path_factory, transcript):
    root = tmp_path_factory.mktemp("wavs")
    (root / "a.wav").write_bytes(WAV)
    (root / "a.txt").write_bytes(transcript)
    assert_clear(lambda: _read_all(str(root)), "a.txt")
