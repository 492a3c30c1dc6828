"""``fedbench ledger``: render the committed reproductions (reports and ledger) from their runs files, or check that
the committed ones are exactly that (library: ``fedbench.report.evidence``)."""

from __future__ import annotations

from pathlib import Path

import typer

from fedbench.cli.common import console, err_console, user_errors


@user_errors
def ledger(
    folder: Path = typer.Argument(Path("reproductions"), help="The evidence folder: PAPER/RECIPE.jsonl runs files."),
    check: bool = typer.Option(
        False, "--check", help="Write nothing; exit 1 if a committed report or the ledger differs from the rendering."
    ),
    recipes_dir: Path = typer.Option(Path("recipes"), "--recipes-dir", help="Where the runs files' recipes are."),
) -> None:
    """Render each runs file's report (PAPER/RECIPE.md and .html) and the ledger (README.md: per paper and table the
    cells run at the paper's scale, their verdicts, the machine, commits, wall time, and each difference's cause from
    PAPER/causes.toml), from the runs files alone; with --check, compare instead of writing.

    Example: `fedbench export --recipe recipes/fedtrip_table4.toml -o reproductions/fedtrip/fedtrip_table4.jsonl`
    then `fedbench ledger` · `fedbench ledger --check`
    """
    from fedbench.report.evidence import check_evidence, render_evidence, write_evidence

    rendered = render_evidence(folder, recipes_dir)
    if check:
        problems = check_evidence(folder, rendered)
        for problem in problems:
            err_console.print(f"[red]stale[/red] {problem}", highlight=False, soft_wrap=True)
        if problems:
            err_console.print(f"run `fedbench ledger {folder}` and commit what it writes", highlight=False)
            raise typer.Exit(1)
        console.print(f"{folder}: {len(rendered)} files are what fedbench renders from the runs files", highlight=False)
        return
    for path in write_evidence(folder, rendered):
        console.print(f"wrote {path}", highlight=False)
