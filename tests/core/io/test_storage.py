"""The storage module: atomic writes, staged folders, hashes, manifests, pinned downloads."""
import hashlib
import json
import os
import subprocess

import pytest

from pruning_core.core.io import storage
from pruning_core.core.errors import CacheError, DataError


def test_atomic_writes_round_trip_and_leave_no_temp_files(tmp_path):
    path = storage.write_json(tmp_path / "sub" / "a.json", {"x": "é", "n": [1, 2]})
    assert path.read_text(encoding="utf-8") == '{\n "x": "é",\n "n": [\n  1,\n  2\n ]\n}\n'
    storage.write_text(tmp_path / "b.txt", "hi")
    storage.write_bytes(tmp_path / "b.txt", b"again")                    # replaces
    assert (tmp_path / "b.txt").read_bytes() == b"again"
    sha, n = storage.write_jsonl(tmp_path / "c.jsonl", [{"a": 1}, "t"])
    assert n == 2 and sha == storage.sha256_file(tmp_path / "c.jsonl")
    assert (tmp_path / "c.jsonl").read_text() == '{"a": 1}\n"t"\n'
    assert not list(tmp_path.rglob("*.tmp"))


def test_permissions_follow_the_umask_unless_given(tmp_path):
    old = os.umask(0o022)
    try:
        assert (storage.write_bytes(tmp_path / "a", b"x").stat().st_mode & 0o777) == 0o644
        assert (storage.write_bytes(tmp_path / "b", b"x", mode=0o600).stat().st_mode & 0o777) == 0o600
    finally:
        os.umask(old)


def test_a_failed_write_keeps_the_old_file_and_no_temp(tmp_path):
    path = storage.write_text(tmp_path / "a.txt", "old")
    with pytest.raises(RuntimeError):
        with storage.atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    with pytest.raises(TypeError):
        storage.write_json(path, {"x": object()})                        # not JSON: nothing written
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_staged_folder_commits_on_success_and_rolls_back_on_error(tmp_path):
    target = tmp_path / "model"
    with storage.staged_folder(target) as tmp:
        assert not tmp.exists() and tmp.parent == tmp_path
        tmp.mkdir()
        (tmp / "w").write_text("1")
    assert (target / "w").read_text() == "1"
    with pytest.raises(RuntimeError):
        with storage.staged_folder(target) as tmp:
            tmp.mkdir()
            (tmp / "w").write_text("2")
            raise RuntimeError("interrupted")
    assert (target / "w").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    with storage.staged_folder(target) as tmp:
        tmp.mkdir()
        (tmp / "w").write_text("3")
    assert (target / "w").read_text() == "3" and sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_remove_leftovers_only_touches_staging_siblings(tmp_path):
    for name in ("model", "model.tmp-1-ab", "model.old-cd", "model.keep-me", "other.tmp-1-ab"):
        (tmp_path / name).mkdir()
    assert sorted(storage.remove_leftovers(tmp_path / "model")) == ["model.old-cd", "model.tmp-1-ab"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.keep-me", "other.tmp-1-ab"]


def test_hashes(tmp_path):
    data = os.urandom(3 << 20)                                           # several 1 MiB chunks
    (tmp_path / "f").write_bytes(data)
    assert storage.sha256_file(tmp_path / "f") == storage.sha256_bytes(data) == hashlib.sha256(data).hexdigest()


def test_manifest_reader(tmp_path):
    path = tmp_path / "manifest.json"
    assert storage.read_manifest(path, "x/1", "Run it.") is None
    path.write_text("{")
    with pytest.raises(CacheError, match=r"corrupt \(not JSON\)\. Run it\."):
        storage.read_manifest(path, "x/1", "Run it.")
    path.write_text(json.dumps({"format": "x/1"}))
    with pytest.raises(CacheError, match="not a x/1 manifest"):
        storage.read_manifest(path, "x/1", "Run it.", require=("files",))
    assert storage.read_manifest(path, "x/1", "Run it.") == {"format": "x/1"}


def test_pip_download_picks_sdist_or_wheel_and_explains_failures(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        (tmp_path / "Pkg-1.0.tar.gz").write_bytes(b"sdist")             # pip may change the name's case
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert storage.pip_download("pkg==1.0", "pkg-1.0.tar.gz", tmp_path, instead="pass it") == tmp_path / "Pkg-1.0.tar.gz"
    assert "--no-binary" in calls[-1] and "--no-deps" in calls[-1]
    with pytest.raises(DataError, match=r"could not download pkg==1\.0.*download pkg-1\.0-py3-none-any\.whl "
                                        r"elsewhere and pass it"):
        storage.pip_download("pkg==1.0", "pkg-1.0-py3-none-any.whl", tmp_path, instead="pass it")
    assert "--only-binary" in calls[-1]

    def broken(cmd, **kwargs):
        raise OSError("no pip")

    monkeypatch.setattr(subprocess, "run", broken)
    with pytest.raises(DataError, match="Could not run pip"):
        storage.pip_download("pkg==1.0", "pkg-1.0.tar.gz", tmp_path, instead="pass it")


def test_check_pinned(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    good = hashlib.sha256(b"abc").hexdigest()
    storage.check_pinned(path, good, "pkg==1.0", "retry")
    storage.check_pinned(path, good, "pkg==1.0", "retry", data=b"abc")
    with pytest.raises(DataError, match=r"SHA-256 .* \(pkg==1\.0\)\. .*delete it and retry\."):
        storage.check_pinned(path, "0" * 64, "pkg==1.0", "retry")
