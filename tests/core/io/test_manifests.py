"""Every manifest is a :class:`pruning_core.core.io.storage.Manifest`: the manifests prepared before it existed read
back and write the same keys and values again."""
import json
from pathlib import Path

import pytest

from pruning_core.core.errors import CacheError
from pruning_core.core.io import codec, storage

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "formats" / "manifests"

# manifests of a prepared cache, written by the dict literals the record replaced -> their format
PREPARED_BEFORE = {
    "data-2.json": codec.DATA_FORMAT, "data-ruler-1.json": codec.RULER_FORMAT, "speech-1.json": codec.SPEECH_FORMAT,
    "bible-1.json": codec.BIBLE_FORMAT, "default-1.json": codec.DEFAULT_FORMAT, "whisper-1.json": codec.WHISPER_FORMAT,
    "bergamot-1.json": codec.BERGAMOT_FORMAT, "smollm2-1.json": codec.SMOLLM2_FORMAT,
    "qwen2.5-0.5b-1.json": codec.QWEN_FORMAT,
}


@pytest.mark.parametrize("name, fmt", sorted(PREPARED_BEFORE.items()))
def test_a_manifest_prepared_before_the_record_reads_and_writes_back_the_same(name, fmt, tmp_path):
    data = storage.read_manifest(FIXTURES / name, fmt, "Prepare it again.", require=("files",))
    manifest = storage.Manifest.from_json(data)
    assert manifest.format == fmt and manifest.files == data["files"] and "files" not in manifest.details
    again = storage.write_manifest(tmp_path / "manifest.json", manifest)
    if "created" in data:
        assert again == data and manifest.created == data["created"]
    else:                                            # the Bible's manifest had no date; a new one records it
        assert {k: v for k, v in again.items() if k != "created"} == data
    assert storage.read_manifest(tmp_path / "manifest.json", fmt, "Prepare it again.") == again


def test_a_manifest_writes_its_format_first_then_the_preparers_keys_then_files_and_date(tmp_path):
    manifest = storage.Manifest(codec.DATA_FORMAT, {"name": "n", "source": {"a": 1}}, files={"x.jsonl": "ab12"},
                                created="2026-01-02T10:00:00+00:00")
    written = storage.write_manifest(tmp_path / "m.json", manifest)
    assert list(written) == ["format", "name", "source", "files", "created"]
    assert json.loads((tmp_path / "m.json").read_text()) == written
    assert storage.Manifest.from_json(written) == manifest
    assert storage.Manifest(codec.DATA_FORMAT, {}).created.endswith("+00:00")


def test_a_manifest_refuses_an_unregistered_format_and_keys_that_are_its_fields():
    with pytest.raises(ValueError, match="not a registered format"):
        storage.Manifest("headprune.nothing/1", {})
    with pytest.raises(ValueError, match=r"\['files'\] are fields of Manifest"):
        storage.Manifest(codec.DATA_FORMAT, {"files": {}})


def test_reading_a_manifest_of_another_format_says_what_to_run(tmp_path):
    storage.write_manifest(tmp_path / "m.json", storage.Manifest(codec.RULER_FORMAT, {}, files={}))
    with pytest.raises(CacheError, match="is not a headprune.data/2 manifest. Run it."):
        storage.read_manifest(tmp_path / "m.json", codec.DATA_FORMAT, "Run it.")
    assert storage.read_manifest(tmp_path / "absent.json", codec.DATA_FORMAT, "Run it.") is None
