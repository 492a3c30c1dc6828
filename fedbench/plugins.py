"""Name registries for plug-ins (algorithms, models, datasets, partitioners).

Plug-ins register with a decorator, as torchvision's ``register_model`` does; looking up an unknown
name raises an error listing close matches.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from fedbench.errors import UnknownNameError

T = TypeVar("T")


class PluginRegistry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._info: dict[str, dict[str, Any]] = {}

    def register(self, name: str, **info: Any) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self._entries[name] = obj
            self._info[name] = info
            return obj

        return decorator

    def get(self, name: str) -> T:
        if name not in self._entries:
            close = difflib.get_close_matches(name, list(self._entries), n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(sorted(self._entries))}"
            raise UnknownNameError(f"unknown {self.kind} {name!r}; {hint}")
        return self._entries[name]

    def info(self, name: str) -> dict[str, Any]:
        self.get(name)
        return self._info[name]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
