"""Per-round diagnostics (``fedbench/vocab/diagnostics.py``): computed on the rounds the spec diagnoses
(``RunSpec.diagnoses``), from what the round already holds, so recording them never changes training. One producer
per catalogue entry (``producers.PRODUCERS``), grouped by family: ``divergence`` (the per-layer weight distances),
``validation`` (the clients' validation losses), ``features`` (FedDr+'s feature statistics, LG-Mix's activations),
``snapshots`` (the features of a fixed test sample for a t-SNE) and ``method`` (what a method reports through
``Algorithm.round_diagnostics``); ``base`` holds what a producer sees. Adding a diagnostic: its catalogue entry, its
producer in one of these modules, its line in ``PRODUCERS`` (and its drawer in ``fedbench/report/diagnostics/``)."""

from fedbench.engine.diagnostics.producers import (
    PRODUCERS,
    check_diagnostics,
    diagnostics_of,
    evaluation_collectors,
    round_diagnostics,
)

__all__ = ["PRODUCERS", "check_diagnostics", "diagnostics_of", "evaluation_collectors", "round_diagnostics"]
