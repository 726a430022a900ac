"""Any mask or scores file, however broken, is read or refused with a :class:`HeadpruneError` that names the
file and says what to do: never a bare ``TypeError``, ``AttributeError``, ``OverflowError`` or ``RecursionError``."""
from __future__ import annotations

import pytest
from hypothesis import given

from bad_inputs import FUZZ, assert_clear, documents, write
from pruning_core.core.heads import HeadLayout, HeadMask, HeadScores
from pruning_core.evaluation.results import ScoreResult, load_mask, load_scores, mask_to_json

LAYOUT = HeadLayout({"encoder_self": (4, 4), "decoder_self": (4, 4), "cross": (4, 4)})
MASK = mask_to_json(HeadMask.from_removed(LAYOUT, LAYOUT.heads()[::5]), "tiny")
SCORES = ScoreResult("gradient", HeadScores({k: tuple(tuple(0.1 * (l + h) for h in range(n)) for l, n in enumerate(rows))
                                             for k, rows in LAYOUT.kinds.items()}),
                     provenance={"model": "tiny", "task": "file:tiny.csv"}, seconds=1.5).to_json()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("files")


@FUZZ
@given(documents(MASK))
def test_any_mask_file_is_read_or_refused_clearly(folder, text):
    path = write(folder / "mask.json", text)
    assert_clear(lambda: load_mask(path, LAYOUT), path)
    assert_clear(lambda: load_mask(path), path)


@FUZZ
@given(documents(SCORES))
def test_any_scores_file_is_read_or_refused_clearly(folder, text):
    path = write(folder / "scores.json", text)
    assert_clear(lambda: load_scores(path, LAYOUT), path)
    assert_clear(lambda: load_scores(path), path)
