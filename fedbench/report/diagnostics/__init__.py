"""Figures of the per-round diagnostics (``fedbench/vocab/diagnostics.py``): ``series`` reads a diagnostics view's
runs' recorded values (and says in one line what the view draws, for the text formats); ``drawers.DRAWERS`` maps each
catalogue entry to its drawer, which lives with its family (``divergence_plots``, ``curve_plots``,
``projection_plots``, ``feature_plots``). Adding a diagnostic's figure: its drawer in one of these modules and its
line in ``DRAWERS``. Nothing is imported here: a text report reads ``series`` without loading matplotlib."""
