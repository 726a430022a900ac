"""Scores kept on disk (pruning_core.scoring.store): read back only for the same weights, task data,
method, split and size; a damaged file reads as absent."""
from __future__ import annotations

from pruning_core.scoring import store as score_store
from pruning_core.core.heads import HeadLayout, HeadScores
from pruning_core.evaluation.results import ScoreResult

LAYOUT = HeadLayout({"encoder_self": (2, 2)})
SHA = "ab" * 32


def result(weights: str | None = SHA, split: str = "train") -> ScoreResult:
    scores = HeadScores.from_lists({"encoder_self": [[0.1, 0.9], [0.5, 0.2]]})
    return ScoreResult("gradient", scores, True, {"weights_sha256": weights, "split": split}, 3.0)


def test_a_kept_score_reads_back_for_the_same_weights_only(tmp_path):
    key = score_store.key_for("movie-sentiment", "gradient", "train", 512)
    path = score_store.save_stored(key, result(), home=tmp_path)
    assert path is not None and path.is_file() and SHA[:16] in str(path)
    back = score_store.load_stored(key, SHA, LAYOUT, home=tmp_path)
    assert back is not None and back.scores == result().scores and back.method == "gradient"
    assert score_store.load_stored(key, "cd" * 32, LAYOUT, home=tmp_path) is None      # prepared again
    other = score_store.key_for("movie-sentiment", "gradient", "train", 256)
    assert score_store.load_stored(other, SHA, LAYOUT, home=tmp_path) is None           # another size
    assert score_store.load_stored(key, SHA, HeadLayout({"encoder_self": (3, 2)}), home=tmp_path) is None


def test_a_damaged_file_reads_as_absent(tmp_path):
    key = score_store.key_for("movie-sentiment", "gradient", "train", 512)
    path = score_store.save_stored(key, result(), home=tmp_path)
    path.write_text(path.read_text()[:40])
    assert score_store.load_stored(key, SHA, LAYOUT, home=tmp_path) is None


def test_a_data_file_is_known_by_its_content(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("text,label\na,0\n")
    first = score_store.key_for(f"file:{data}", "gradient", "test", 8)
    data.write_text("text,label\nb,1\n")
    assert score_store.key_for(f"file:{data}", "gradient", "test", 8) != first
    assert score_store.key_for(f"file:{tmp_path / 'gone.csv'}", "gradient", "test", 8) is None


def test_weights_without_a_hash_are_not_kept(tmp_path):
    key = score_store.key_for("movie-sentiment", "gradient", "train", 512)
    assert score_store.save_stored(key, result(weights=None), home=tmp_path) is None
    assert not (tmp_path / score_store.SCORES_DIR).exists()
