"""Independent RNG streams derived from one run seed.

Each stream is keyed by name (and optional integers such as round and client id), so the partition
and the client-sampling sequence never depend on the algorithm, and a client's training randomness
in round t does not depend on which other clients trained before it, on the number of workers, or
on whether the run was resumed: there is no RNG state to carry, only the keys.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch is imported where a torch generator is made: the report's projections seed without it
    import torch


def derive_seed(seed: int, stream: str, *keys: int) -> int:
    text = f"{seed}/{stream}/" + "/".join(str(k) for k in keys)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") & ((1 << 63) - 1)


def numpy_rng(seed: int, stream: str, *keys: int) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, stream, *keys))


def torch_generator(seed: int, stream: str, *keys: int, device: torch.device | str = "cpu") -> torch.Generator:
    # local: recipes, the engine's numpy streams and the report derive seeds here without torch
    import torch

    generator = torch.Generator(device=device)
    generator.manual_seed(derive_seed(seed, stream, *keys))
    return generator
