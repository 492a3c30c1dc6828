"""The ``fedbench recipes`` command group: the recipes shipped with fedbench (library:
``fedbench.recipes.shipped``). ``list`` names them; ``copy`` writes them into a folder to edit. ``fedbench run NAME``
and ``fedbench report --recipe NAME`` take a shipped recipe's name where they take a file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from fedbench.cli.common import console, print_json, print_listing, user_errors

app = typer.Typer(
    help="List the recipes shipped with fedbench, or copy them into a folder to edit.", no_args_is_help=True
)

AsJson: Any = typer.Option(False, "--json", help="print JSON instead of a table")
Names = Annotated[
    list[str] | None, typer.Argument(help="Shipped recipes' names (default: every one).", show_default=False)
]


@app.command("list")
@user_errors
def list_command(as_json: bool = AsJson) -> None:
    """Every shipped recipe: its name (what `fedbench run NAME` takes), paper and title.

    Example: `fedbench recipes list` · `fedbench run quickstart`
    """
    from fedbench.recipes.shipped import shipped_recipes

    recipes = shipped_recipes()
    if as_json:
        print_json([{"name": r.name, "paper": r.paper, "title": r.title, "path": str(r.path)} for r in recipes])
        return
    print_listing(None, ("recipe", "paper", "title"), [[r.name, r.paper, r.title] for r in recipes])


@app.command("copy")
@user_errors
def copy_command(
    names: Names = None,
    to: Path = typer.Option(Path("recipes"), "--to", help="Folder to copy them into (created)."),
    force: bool = typer.Option(False, "--force", help="Replace files there that differ."),
) -> None:
    """Copy shipped recipes into a folder, to edit them or run them by path.

    Example: `fedbench recipes copy quickstart --to my-recipes` · `fedbench run my-recipes/quickstart.toml`
    """
    from fedbench.recipes.shipped import copy_shipped

    for target in copy_shipped(list(names or []), to, overwrite=force):
        console.print(escape(str(target)), highlight=False)


def register_cli(parent: typer.Typer) -> typer.Typer:
    """Add the ``recipes`` group to ``parent`` (the main app, or a test's own)."""
    parent.add_typer(app, name="recipes")
    return app
