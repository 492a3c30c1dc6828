"""CSV and JSON renderers (``fedbench/report/render/csv_json.py``): one CSV line per cell that exists, under one
header, with the figures a spreadsheet needs (values as JSON, the difference to the paper, partial cells); JSON of
the tables with their notes and the papers' summaries."""

from __future__ import annotations

import csv
import io
import json

from report_fixtures import small_table

from fedbench.report.render.csv_json import csv_document, to_csv, to_json


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_one_csv_line_per_existing_cell_with_its_figures():
    lines = rows(to_csv(small_table()))
    assert [(r["row"], r["column"]) for r in lines] == [
        ("fedavg", "mnist"),
        ("fedavg", "cifar10"),
        ("fed_prox", "mnist"),
    ]
    first = lines[0]
    assert (first["paper"], first["recipe"], first["table"], first["scale"]) == ("testpaper", "tiny", "acc", "smoke")
    assert (first["n"], first["expected"], first["mean"], first["std"]) == ("3", "3", "91.5", "0.5")
    assert json.loads(first["values"]) == [91.0, 91.5, 92.0]
    assert (first["published"], first["difference"], first["partial"]) == ("90.0", "1.5", "False")
    assert lines[1]["published"] == lines[1]["difference"] == ""  # no published value: empty, not 0
    assert lines[2]["partial"] == "True" and lines[2]["std"] == ""  # one seed of three
    assert all(r["baseline"] == r["verdict"] == "" for r in lines)  # no comparison, no verdict in this table


def test_csv_says_which_cells_count_to_what_target_and_which_have_none():
    table = small_table()  # the renderer writes what the cells hold, whatever the figure
    table.cells[("fedavg", "mnist")].target = 80.0
    table.cells[("fedavg", "cifar10")].no_target = True
    lines = rows(to_csv(table))
    assert [(r["no_target"], r["target"]) for r in lines] == [("False", "80.0"), ("True", ""), ("False", "")]
    assert list(lines[0])[-3:] == ["added", "no_target", "target"]


def test_a_csv_document_has_one_header_over_every_table():
    text = csv_document([small_table("a"), small_table("b")])
    assert text.count("paper,recipe,table,row") == 1
    assert [r["table"] for r in rows(text)] == ["a"] * 3 + ["b"] * 3
    assert csv_document([]) == ""


def test_json_holds_the_summaries_and_each_table_with_its_notes():
    document = json.loads(to_json([small_table()], [{"paper": "testpaper", "cells": 1}]))
    assert document["papers"] == [{"paper": "testpaper", "cells": 1}]
    (table,) = document["tables"]
    assert (table["table"], table["rows"], table["columns"]) == ("acc", ["fedavg", "fed_prox"], ["mnist", "cifar10"])
    assert [(c["row"], c["column"], c["mean"]) for c in table["cells"]] == [
        ("fedavg", "mnist", 91.5),
        ("fedavg", "cifar10", 62.0),
        ("fed_prox", "mnist", 88.0),
    ]
    assert any("best test accuracy" in note for note in table["notes"])
