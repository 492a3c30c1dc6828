"""The provenance keys more than one layer reads: a run's peak memory as the report reads it back."""

from __future__ import annotations

from fedbench.vocab.provenance import PEAK_MEMORY, peak_memory


def test_peak_memory_reads_the_recorded_bytes_and_how_they_were_measured():
    recorded = {PEAK_MEMORY: {"bytes": 123_456, "measure": "cuda max_memory_allocated"}, "git": "x"}
    assert peak_memory(recorded) == (123_456, "cuda max_memory_allocated")


def test_peak_memory_of_a_run_without_one_is_not_available():
    # a run trained before the measure existed has no entry; one whose measure failed stored null
    assert peak_memory(None) == (None, "n/a")
    assert peak_memory({}) == (None, "n/a")
    assert peak_memory({PEAK_MEMORY: None}) == (None, "n/a")
    assert peak_memory({PEAK_MEMORY: {"bytes": 10}}) == (10, "n/a")
