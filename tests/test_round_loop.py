"""The round loop (engine/loop.py) checked by hand: sampling, bytes, eval_every, divergence, resume."""

from __future__ import annotations
