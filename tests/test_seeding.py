"""Seeding (fedbench/seeding.py): the keyed seed streams are independent of each other and of the order of their
keys."""

from __future__ import annotations

from fedbench.seeding import derive_seed


def test_seed_streams_are_independent():
    assert derive_seed(0, "partition") != derive_seed(0, "sampling")
    assert derive_seed(0, "client", 1, 2) != derive_seed(0, "client", 2, 1)
