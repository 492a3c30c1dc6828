"""A run's stored summary read back as the typed record ``summarize`` writes (``vocab/summary.py``)."""

from __future__ import annotations

from fedbench import curves
from fedbench.vocab.summary import stored_summary


def test_a_stored_summary_reads_back_as_the_record_summarize_wrote():
    summary = curves.summarize([(1, 0.5), (2, 0.75)], [60])
    assert stored_summary(dict(summary)) == summary
    assert stored_summary(None) is None and stored_summary({}) is None  # not finished
    older = stored_summary({"best": 0.75, "final": 0.5})  # a registry's summary without the later keys
    assert older == {
        "best": 0.75,
        "best_round": None,
        "final": 0.5,
        "last5_mean": None,
        "last10_mean": None,
        "rounds_to_target": {},
        "evaluated_rounds": 0,
    }
