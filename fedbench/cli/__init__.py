"""fedbench command line: one thin module per command group over library calls.

``run`` (``cli/run.py``), ``plan`` (``cli/plan.py``), ``report`` and ``compare`` (``cli/report.py``), ``runs`` and
``show`` (``cli/runs.py``), ``status`` (``cli/status.py``), ``algorithms`` and ``models`` (``cli/listings.py``), the
``datasets`` group (``cli/datasets.py``), the ``recipes`` group (``cli/recipes.py``), ``export`` and ``import`` (``cli/transfer.py``), ``ledger`` (``cli/ledger.py``), ``check-method``
(``cli/check.py``). Each command parses its options, calls
the library, prints. The package is the only code that prints for humans or exits; errors go through the one
handler in ``cli/common.py``.

Start-up: a command module imports the library it calls inside the command function, so building the app, and the
commands that train nothing and build no model (``--help``, ``runs``, ``show``, ``status``, ``export``, ``import``,
``algorithms``, ``report`` of tables without model statistics), never import torch
(tests/cli/test_startup.py, benchmarks/startup.py). That is the reason for every function-level import of this
package.

Exit codes: 0 success, 2 user error (one line on stderr, nothing written to the registry),
1 a run failed unexpectedly (``import``: a run conflicted), 130 interrupted. A mistake on the command line itself
(an unknown command or option, a missing argument, a value an option does not take) is a user error like any other:
``main`` prints it on one line, where Typer would draw a usage line, a hint and a panel.
"""

from __future__ import annotations

import sys

import typer
from rich.markup import escape

from fedbench.cli import check, datasets, ledger, listings, plan, recipes, report, run, runs, status, transfer
from fedbench.cli.common import err_console, one_line

app = typer.Typer(
    # a bug's traceback must not print local variables: one of them may be a registry URL with its password
    pretty_exceptions_show_locals=False,
    no_args_is_help=True,
    rich_markup_mode="markdown",
    help="Reproduce the tables of published federated-learning papers: compile TOML recipes into runs, "
    "train them, record them in a registry and render the paper's tables.",
)
app.command()(run.run)
app.command()(plan.plan)
app.command()(report.report)
app.command()(report.compare)
app.command()(runs.runs)
app.command()(runs.show)
app.command()(status.status)
app.command()(transfer.export)
app.command("import")(transfer.import_runs)
app.command()(ledger.ledger)
app.command()(listings.algorithms)
app.command()(listings.models)
app.command("check-method")(check.check_method)
datasets.register_cli(app)
recipes.register_cli(app)


def main() -> None:
    """``fedbench``: the app, with command-line mistakes reported as one line (exit code 2) instead of Typer's panel."""
    try:
        # not standalone: Typer raises usage errors instead of printing them, and returns exit codes
        code = app(prog_name="fedbench", standalone_mode=False)
    except typer.TyperException as error:  # Typer's base of every usage error (unknown option, missing argument)
        sys.exit(usage_error(error))
    sys.exit(code if isinstance(code, int) else 0)  # a typer.Exit's code; a command's return value is not one


def usage_error(error: typer.TyperException) -> int:
    """Print ``error`` (a mistake on the command line) as one line naming the command and where its help is; its
    exit code (2). Running ``fedbench`` with no command is not a mistake of this kind: Typer has printed the help."""
    context = getattr(error, "ctx", None)
    if type(error).__name__ == "NoArgsIsHelpError":  # Typer's class for it is private; the help is already out
        return error.exit_code
    message = one_line(" ".join(error.format_message().split()))
    hint = f" (see '{context.command_path} --help')" if context is not None else ""
    err_console.print(f"[red]error:[/red] {escape(message)}{escape(hint)}", highlight=False, soft_wrap=True)
    return error.exit_code


__all__ = ["app", "main"]
