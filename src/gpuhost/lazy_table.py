"""A table of named classes imported only when asked for: the operation and role tables share it.

Each entry names a module and a class; :meth:`LazyTable.get` imports that one class (a run that uses
``line`` and ``template`` loads nothing of the LXC, NVIDIA or VM machinery) and checks that the class
really carries the name the table gives it. :meth:`LazyTable.all` imports every entry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyTable(Generic[T]):
    def __init__(self, what: str, entries: dict[str, tuple[str, str]], name_of: Callable[[T], str]) -> None:
        self.what = what
        self.entries = entries
        self.name_of = name_of
        self._loaded: dict[str, T] = {}

    def get(self, name: str) -> T | None:
        found = self._loaded.get(name)
        if found is None and name in self.entries:
            module, attr = self.entries[name]
            found = getattr(importlib.import_module(module), attr)
            assert found is not None
            if self.name_of(found) != name:
                raise RuntimeError(
                    f"{module}.{attr} is {self.what} '{self.name_of(found)}', but the table lists it as '{name}'"
                )
            self._loaded[name] = found
        return found

    def names(self) -> list[str]:
        return sorted(self.entries)

    def all(self) -> dict[str, T]:
        """Every entry, imported; two entries that turn out to be one name are refused."""
        table: dict[str, T] = {}
        for name in self.entries:
            found = self.get(name)
            if found is None:
                continue
            key = self.name_of(found)
            if key in table:
                raise RuntimeError(f"{self.what} '{key}' is defined twice")
            table[key] = found
        return table
