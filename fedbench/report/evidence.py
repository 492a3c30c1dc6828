"""The committed evidence of reproductions: a recipe's runs exported by ``fedbench export``, the reports fedbench
renders from them, and the ledger that sums them up with the cause of every difference (``fedbench ledger``).

An evidence folder (``reproductions/`` in the repository) holds, per paper:

- ``PAPER/RECIPE.jsonl``: the recipe's finished runs at its full scale (``fedbench export --recipe RECIPE``);
- ``PAPER/RECIPE.md``, ``PAPER/RECIPE.html`` and ``PAPER/RECIPE/*.png``: the report rendered from them and its
  plots (generated);
- ``PAPER/causes.toml``: why a cell does not reproduce, or a paper's claim is not supported (written by a person);

and ``README.md``, the ledger (generated). Everything generated is a function of the exports, the recipes and the
causes, so ``check_evidence`` can tell whether the committed files are exactly what fedbench renders: the evidence is
the tool's output and cannot be edited by hand. The one thing compared loosely is the PNG bytes of the plots, which
depend on the matplotlib and FreeType versions that drew them; their data is the runs' curves, which the page also
carries (the per-run SVG polylines) and which are compared byte for byte; a plot file is checked to be there.
"""

from __future__ import annotations

import re
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from fedbench.errors import FedbenchError
from fedbench.recipes.expand import compile_recipes
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import resolve_spec
from fedbench.registry import Registry
from fedbench.registry.transfer import import_runs, read_runs_file
from fedbench.report.collect import build_tables
from fedbench.report.ledger_items import CAUSE_KINDS, Cause, RecipeEvidence
from fedbench.report.render import render
from fedbench.report.render.html import html_pages
from fedbench.report.render.ledger import ledger

LEDGER = "README.md"
CAUSES = "causes.toml"
EXPORT_SUFFIX = ".jsonl"
PLOT_DPI = 100
# Table views whose values come from a data set rather than from runs (a partition's class counts per client)
READS_DATA = frozenset({"partition"})


class EvidenceError(FedbenchError):
    """A malformed evidence folder: a runs file without its recipe, a bad causes file."""


def load_causes(path: Path) -> list[Cause]:
    """The causes of a paper's differences; an unreadable or malformed file is an error naming the entry and key."""
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise EvidenceError(f"{path}: cannot read it as TOML ({exc})") from None
    unknown = sorted(set(data) - {"cause"})
    if unknown:
        raise EvidenceError(f"{path}: unknown key {unknown[0]!r}; a causes file holds [[cause]] entries only")
    causes = []
    for number, entry in enumerate(data.get("cause", []), start=1):
        try:
            causes.append(Cause.model_validate(entry))
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"]) or "(entry)"
            raise EvidenceError(
                f"{path}: [[cause]] {number}, key {key}: {first['msg']}"
                + (f" (kinds: {', '.join(CAUSE_KINDS)})" if key == "kind" else "")
            ) from None
    return causes


def find_evidence(folder: Path, recipes_dir: Path) -> list[RecipeEvidence]:
    """The runs files ``folder/PAPER/RECIPE.jsonl``, each with its recipe ``recipes_dir/RECIPE.toml`` (whose paper
    must be PAPER), in paper then recipe order."""
    if not folder.is_dir():
        raise EvidenceError(f"{folder}: no such folder; give the evidence folder (e.g. reproductions)")
    found = []
    for export in sorted(folder.glob(f"*/*{EXPORT_SUFFIX}")):
        recipe_file = recipes_dir / f"{export.stem}.toml"
        if not recipe_file.is_file():
            raise EvidenceError(
                f"{export}: no recipe {recipe_file} for it; a runs file is named after its recipe (RECIPE.jsonl)"
            )
        recipe = load_recipe(recipe_file)
        paper = export.parent.name
        if recipe.paper != paper:
            raise EvidenceError(
                f"{export}: recipe {recipe.name} is of paper {recipe.paper!r}; move it to {recipe.paper}/"
            )
        found.append(RecipeEvidence(paper, export, recipe, recipe_file))
    return sorted(found, key=lambda e: (e.paper, e.recipe.order, e.recipe.name))


def render_evidence(folder: Path, recipes_dir: Path) -> dict[str, str | bytes]:
    """{path relative to ``folder``: text or PNG bytes} of everything generated from the exports in ``folder``: each
    recipe's Markdown report, HTML page and plots (``PAPER/RECIPE/*.png``, for pages that cannot embed them: the
    Markdown report on a code host, the ledger), and the ledger. Each runs file is imported into a throw-away
    registry of its own, so that its report (whose HTML names runs by registry id) is what ``fedbench import FILE``
    into an empty registry and ``fedbench report`` give, whatever other runs files the folder holds; every runs file
    also goes into one shared throw-away registry, where a run two files hold differently is a conflict. The exports
    are the source; no registry of the user's is read or written."""
    evidence = find_evidence(folder, recipes_dir)
    causes = {paper: load_causes(folder / paper / CAUSES) for paper in dict.fromkeys(e.paper for e in evidence)}
    out: dict[str, str | bytes] = {}
    with tempfile.TemporaryDirectory(prefix="fedbench-evidence-") as scratch:
        every_file = Registry(f"sqlite:///{Path(scratch) / 'evidence.db'}")
        try:
            for index, item in enumerate(evidence):
                lines = read_runs_file(item.export, resolve_spec)
                outcome = import_runs(every_file, lines)
                if outcome.conflicts:
                    conflict = outcome.conflicts[0]
                    raise EvidenceError(
                        f"{item.export} line {conflict.line}: run {conflict.spec_hash} conflicts with another "
                        f"evidence file's ({conflict.reason}); a run belongs to one runs file"
                    )
                item.runs = [run for _, run in lines]
                own = Registry(f"sqlite:///{Path(scratch) / f'file{index}.db'}")
                try:
                    import_runs(own, lines)
                    out.update(_rendered_report(item, own))
                finally:
                    own.engine.dispose()
        finally:
            every_file.engine.dispose()
        out[LEDGER] = ledger(evidence, causes)
    return out


def _rendered_report(item: RecipeEvidence, store: Registry) -> dict[str, str | bytes]:
    """{path: text or PNG bytes} of ``item``'s report (Markdown, HTML page, plots), from ``store``, which holds its
    runs file alone; and ``item``'s counts of planned and stale runs and its tables."""
    # local: matplotlib, drawn only here (``fedbench ledger --help`` and the error paths stay light)
    from fedbench.report.plots import figures, png_bytes, png_name

    planned = {run.spec_hash for run in compile_recipes([item.recipe_file], scale="full")}
    item.planned = len(planned)
    item.stale = sum(run.spec_hash not in planned for run in item.runs)
    # A partition view reads the data set, not runs: rendered here it would depend on whether this machine has the
    # data (and name its data root), so the evidence leaves it out (``fedbench report`` shows it where the data is).
    recipe = item.recipe.model_copy(update={"tables": [v for v in item.recipe.tables if v.kind not in READS_DATA]})
    item.tables = build_tables([recipe], store, scale="full")
    stem = f"{item.paper}/{recipe.name}"
    out: dict[str, str | bytes] = {f"{stem}.md": render(item.tables, "markdown")}
    page = html_pages([recipe], item.tables, store)[recipe.paper]
    out[f"{stem}.html"] = page if page.endswith("\n") else page + "\n"
    for view in recipe.tables:
        for figure_stem, fig in figures(recipe, view, store):
            out[f"{stem}/{png_name(figure_stem)}"] = png_bytes(fig, dpi=PLOT_DPI)
    return out


def write_evidence(folder: Path, rendered: dict[str, str | bytes]) -> list[Path]:
    """Write ``rendered`` into ``folder``, and delete the plots of a recipe's folder it no longer draws."""
    written = []
    for stale in _generated_looking(folder):
        if stale.suffix == ".png" and stale.relative_to(folder).as_posix() not in rendered:
            stale.unlink()
    for relative, content in rendered.items():
        path = folder / relative
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise EvidenceError(f"{path}: cannot write it ({exc.strerror})") from None
        written.append(path)
    return written


# A PNG embedded in a page, its base64 payload captured (group 2) between what comes before and after it.
_PNG = re.compile(r'(src="data:image/png;base64,)([A-Za-z0-9+/=]*)(")')


def comparable(relative: str, content: str | bytes) -> str:
    """A generated file as ``check_evidence`` compares it: an HTML page with its PNG payloads blanked, a PNG not at
    all (its bytes depend on the matplotlib and FreeType that drew it), anything else as it is."""
    if isinstance(content, bytes):
        return ""
    return _PNG.sub(r"\1\3", content) if relative.endswith(".html") else content


def check_evidence(folder: Path, rendered: dict[str, str | bytes]) -> list[str]:
    """What differs between the committed files in ``folder`` and ``rendered``: one line per file (missing,
    different, or generated-looking without a runs file that renders it); empty when they agree."""
    problems = []
    for relative, content in rendered.items():
        path = folder / relative
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif isinstance(content, bytes):
            continue  # present: its bytes are not compared (``comparable``)
        elif comparable(relative, path.read_text(encoding="utf-8")) != comparable(relative, content):
            problems.append(f"{path}: differs from what fedbench renders from the runs files")
    for path in _generated_looking(folder):
        if path.relative_to(folder).as_posix() not in rendered:
            problems.append(f"{path}: no runs file renders it (its {EXPORT_SUFFIX} is gone); delete it")
    return problems


def _generated_looking(folder: Path) -> Iterator[Path]:
    """The files of ``folder`` that look generated: reports (PAPER/*.md, *.html) and plots (PAPER/RECIPE/*.png)."""
    for pattern in ("*/*.md", "*/*.html", "*/*/*.png"):
        yield from sorted(folder.glob(pattern))
