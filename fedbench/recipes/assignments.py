"""``KEY=VALUE`` assignments from the command line: one parser and one value syntax for every option.

Used by ``run --set`` / ``--only``, ``models --set`` and ``datasets check|prepare --param``. VALUE is read as a
TOML value, the syntax of the recipes themselves: ``5``, ``0.1``, ``true``, ``[32, 32]``, ``"quoted text"``,
``{ alpha = 0.5 }``. Anything that is not a TOML value (``fedavg``, ``CNN MNIST-90%``) is taken as the plain
string. KEY may be dotted (``algorithm_params.mu``) where the option nests (``run --set``).
Bad input raises ``ConfigError`` naming the option and the text.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Iterable
from typing import Any

from fedbench.errors import ConfigError


def parse_value(raw: str) -> Any:
    """A TOML value, or else the text itself as a string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def parse_assignment(text: str, option: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → ``(KEY, value)`` with VALUE read by ``parse_value``."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"{option} {text!r}: expected KEY=VALUE, e.g. {option} rounds=5")
    return key, parse_value(raw)


def parse_assignments(items: Iterable[str], option: str) -> dict[str, Any]:
    """Flat ``{KEY: value}`` from repeated ``KEY=VALUE`` options (a repeated key: the last one wins)."""
    return dict(parse_assignment(item, option) for item in items)


def nested_assignments(
    items: Iterable[str],
    option: str,
    allowed: Collection[str] | None = None,
    listed: Collection[str] | None = None,
    what: str = "key",
) -> dict[str, Any]:
    """Dotted ``a.b.c=VALUE`` → ``{"a": {"b": {"c": value}}}``; a first part not in ``allowed`` is an error
    naming ``listed`` (default: ``allowed``) as the valid ones."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = parse_assignment(item, option)
        parts = key.split(".")
        if allowed is not None and parts[0] not in allowed:
            valid = ", ".join(listed if listed is not None else allowed)
            raise ConfigError(f"{option} {item!r}: unknown {what} {parts[0]!r}; valid keys: {valid}")
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{option} {item!r}: {part!r} is already set to a value, not a table of keys")
            node = child
        node[parts[-1]] = value
    return out


def label_filters(items: Iterable[str], option: str = "--only") -> dict[str, set[str]]:
    """``--only KEY=VALUE`` filters on run labels (strings): values of one key are alternatives, different keys
    must all match. Numbers are compared as a label writes them (``0.1``, ``1``)."""
    out: dict[str, set[str]] = {}
    for item in items:
        key, value = parse_assignment(item, option)
        out.setdefault(key, set()).add(f"{value:g}" if isinstance(value, float) else str(value))
    return out


__all__ = ["parse_value", "parse_assignment", "parse_assignments", "nested_assignments", "label_filters"]
