"""Table building, renderers and plots."""

from fedbench.report.render import FORMATS, render
from fedbench.report.table import Table, build_table

__all__ = ["FORMATS", "Table", "build_table", "render"]
