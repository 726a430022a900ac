"""One small registry helper, used for every extension point (architectures, tasks, metrics, scorers).

- Names are unique: registering a name twice raises instead of silently replacing the first entry.
- Unknown names raise the registry's error with "did you mean" and the list of known names.
- An entry can be *lazy*: a loader called on first ``get``, so a module that sits higher in the
  library (SMP) can be listed by a lower one (scoring) without an upward import.
- Metadata (a description and free keywords such as ``needs_labels`` or ``cost``) is declared where
  the entry is registered and can be read without loading a lazy entry.
"""
from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from pruning_core.core.errors import HeadpruneError, did_you_mean

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """What a registry knows about one name, before (lazy) or after it is loaded."""

    name: str
    description: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)


class Registry(Generic[T]):
    """Names -> implementations for one extension point.

    Args:
        what: how an entry is called in messages ("architecture", "task", "metric", "scoring method").
        error: the error class raised for an unknown name (a :class:`HeadpruneError` subclass).
        hint: appended to the unknown-name message: what the user can do instead.
    """

    def __init__(self, what: str, error: type[HeadpruneError] = HeadpruneError, hint: str = "") -> None:
        self.what = what
        self.error = error
        self.hint = hint
        self._items: dict[str, T] = {}
        self._loaders: dict[str, Callable[[], T]] = {}
        self._entries: dict[str, Entry[T]] = {}
        self._lock = threading.Lock()

    # -- registering ----------------------------------------------------------------------------
    def _claim(self, name: str, description: str, meta: Mapping[str, Any]) -> None:
        if not name:
            raise ValueError(f"A {self.what} needs a non-empty name.")
        if name in self._entries:
            raise ValueError(f"A {self.what} named {name!r} is already registered; choose another name.")
        self._entries[name] = Entry(name, description, MappingProxyType(dict(meta)))

    def add(self, name: str, item: T, *, description: str = "", **meta: Any) -> T:
        """Register ``item`` under ``name``; returns ``item`` (usable as a decorator helper)."""
        with self._lock:
            self._claim(name, description, meta)
            self._items[name] = item
        return item

    def add_lazy(self, name: str, loader: Callable[[], T], *, description: str = "", **meta: Any) -> None:
        """Register ``name`` now; ``loader()`` builds the item on the first ``get(name)``."""
        with self._lock:
            self._claim(name, description, meta)
            self._loaders[name] = loader

    # -- looking up -----------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._entries)

    def unknown(self, name: str) -> HeadpruneError:
        """The error for an unknown ``name`` (raise it)."""
        hint = f" {self.hint}" if self.hint else ""
        return self.error(f"Unknown {self.what} {name!r}.{did_you_mean(name, self._entries)} "
                          f"Available: {', '.join(self.names()) or 'none'}.{hint}")

    def entry(self, name: str) -> Entry[T]:
        """Description and metadata of ``name``, without loading a lazy entry."""
        try:
            return self._entries[name]
        except KeyError:
            raise self.unknown(name) from None

    def get(self, name: str) -> T:
        """The implementation registered under ``name`` (loading it if lazy)."""
        if name not in self._entries:
            raise self.unknown(name)
        with self._lock:
            if name not in self._items:
                self._items[name] = self._loaders.pop(name)()
            return self._items[name]

    def items(self) -> list[tuple[str, T]]:
        """Every (name, implementation), sorted by name; loads lazy entries."""
        return [(n, self.get(n)) for n in self.names()]


def lazy_object(target: str, *args: Any) -> Callable[[], Any]:
    """A loader for :meth:`Registry.add_lazy` that imports ``"package.module:Name"`` on first use
    and returns ``Name(*args)`` (an entry point written as data, so no module imports the one
    that registers into it)."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"A lazy target is 'package.module:Name', got {target!r}.")

    def load() -> Any:
        return getattr(importlib.import_module(module), name)(*args)
    return load

