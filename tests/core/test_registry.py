"""The one registry helper: unique names, did-you-mean, lazy entries, metadata without loading."""
import pytest

from pruning_core.core.errors import DataError, HeadpruneError
from pruning_core.core.registry import Registry


def test_duplicate_names_raise():
    reg = Registry("widget")
    reg.add("a", 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.add("a", 2)
    with pytest.raises(ValueError, match="already registered"):
        reg.add_lazy("a", lambda: 3)
    assert reg.get("a") == 1


def test_unknown_name_suggests_and_lists():
    reg = Registry("widget", DataError, hint="Register one first.")
    reg.add("gradient", 1)
    reg.add("random", 2)
    with pytest.raises(DataError, match=r"Unknown widget 'gradiant'\. Did you mean 'gradient'\? "
                                        r"Available: gradient, random\. Register one first\."):
        reg.get("gradiant")
    with pytest.raises(HeadpruneError):
        reg.entry("nope")


def test_lazy_entry_loads_once_and_metadata_needs_no_load():
    calls = []
    reg = Registry("scorer")

    def load():
        calls.append(1)
        return "loaded"

    reg.add_lazy("smp", load, description="learned", needs_labels=False, cost="cheap")
    assert reg.entry("smp").meta["needs_labels"] is False and reg.entry("smp").description == "learned"
    assert calls == [] and "smp" in reg and reg.names() == ["smp"]
    assert reg.get("smp") == "loaded" and reg.get("smp") == "loaded"
    assert calls == [1]
    assert reg.items() == [("smp", "loaded")]


def test_lazy_object_imports_on_first_use_only():
    from pruning_core.core.registry import lazy_object

    reg = Registry("thing")
    reg.add_lazy("od", lazy_object("collections:OrderedDict"))
    assert type(reg.get("od")).__name__ == "OrderedDict"
    with pytest.raises(ValueError, match="package.module:Name"):
        lazy_object("collections.OrderedDict")
