"""Table building (``table``), renderers (``render``), plots, and the run views of ``fedbench runs``/``show``.

Imports nothing itself: ``fedbench runs`` and ``show`` read ``run_view`` without loading the table builder (and
torch with it) — start-up speed.
"""
