"""The names every layer reads (metrics, figures, run statuses); imports no torch."""
