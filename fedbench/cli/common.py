"""What every command shares: the consoles, the one error handler, JSON output and the common options.

``user_errors`` is the only place that turns errors into exit codes: a ``FedbenchError`` becomes one line on
stderr and exit code 2; Ctrl-C becomes a hint and exit code 130; anything else is a bug and keeps its traceback.
``KEY=VALUE`` options are parsed by ``fedbench.recipes.assignments`` (TOML values), re-exported here for the commands.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar, overload

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text
from sqlalchemy.exc import DBAPIError

from fedbench.errors import FedbenchError, RegistryError
from fedbench.recipes.assignments import label_filters, parse_assignments

# emoji=False: a recipe key or value such as ":smile:" is printed as written, never turned into an emoji
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)
WORD_ROOM = 12  # print_listing: a table column narrower than its longest word (or 12) folds words: use blocks


def print_listing(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    whole: Sequence[int] = (),
    one_line: bool = False,
) -> None:
    """A list of named entries that never cuts a value (rich ends a cut value in "…"; piped output is 80 columns
    wide, or $COLUMNS). A table when the terminal has room for every name (the first column) on one line, for
    every line of the ``whole`` columns (names such as labels, one per line) and for the longest word of each other
    column (up to WORD_ROOM characters; longer values fold onto further lines); else one block per entry: its name,
    then "column: value" lines that wrap (``one_line``: the name and its "column: value" pairs on one line that
    wraps, for long listings such as the runs of a registry)."""
    plain = [[Text.from_markup(value).plain for value in row] for row in [list(columns), *rows]]

    def longest(i: int, split: Callable[[str], list[str]]) -> int:
        return max((cell_len(part) for row in plain for part in split(row[i])), default=1)

    # each column's width: the whole of its longest line (its natural width), at least ``room``
    natural = [longest(i, str.splitlines) for i in range(len(columns))]
    room = [natural[i] if i == 0 or i in whole else min(longest(i, str.split), WORD_ROOM) for i in range(len(columns))]
    spare = console.width - (sum(room) + 3 * len(columns) + 1)  # 3: padding and border per column
    if spare >= 0:
        widths = list(room)
        for i in range(len(columns)):  # the room left goes to the columns that would wrap, left to right
            grow = min(natural[i] - widths[i], spare)
            widths[i] += grow
            spare -= grow
        table = RichTable(title=title)
        for column, width in zip(columns, widths):  # fixed widths: rich never narrows a name below its room
            table.add_column(column, overflow="fold", width=width)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    if title:
        console.print(title, style="bold")
    for row in rows:
        if one_line:
            pairs = [
                f"{column}: {', '.join(value.splitlines())}" for column, value in zip(columns[1:], row[1:]) if value
            ]
            console.print(f"[bold]{row[0]}[/bold] · " + " · ".join(pairs), overflow="fold")
            continue
        console.print(row[0], style="bold", overflow="fold")
        for column, value in zip(columns[1:], row[1:]):
            if value:
                console.print(f"  {column}: {' · '.join(value.splitlines())}", overflow="fold")


F = TypeVar("F", bound=Callable[..., Any])

RESUME_HINT = "interrupted: finished rounds are saved; run the same command again to resume"

RegistryOption: Any = typer.Option(
    None,
    "--registry",
    help="SQLAlchemy URL of the run registry [default: $FEDBENCH_REGISTRY or sqlite:///registry/fedbench.db]",
)


class _NoticeHandler(logging.Handler):
    """Library notices (the ``fedbench`` loggers, e.g. a registry being upgraded) as one line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(f"[yellow]note:[/yellow] {escape(record.getMessage())}", highlight=False, soft_wrap=True)


def show_library_notices() -> None:
    """Route the library's notices to stderr (once per process; every command calls it through ``user_errors``)."""
    logger = logging.getLogger("fedbench")
    if not any(isinstance(h, _NoticeHandler) for h in logger.handlers):
        logger.addHandler(_NoticeHandler(logging.INFO))
        logger.setLevel(logging.INFO)


@overload
def user_errors(fn: F) -> F: ...
@overload
def user_errors(*, interrupted: str = RESUME_HINT) -> Callable[[F], F]: ...
def user_errors(fn: F | None = None, *, interrupted: str = RESUME_HINT) -> F | Callable[[F], F]:
    """Decorate a command: ``FedbenchError`` → one line on stderr, exit 2; Ctrl-C → ``interrupted``, exit 130.

    Use as ``@user_errors`` or ``@user_errors(interrupted="...")`` (what a Ctrl-C leaves behind).
    """

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            show_library_notices()
            try:
                return command(*args, **kwargs)
            except FedbenchError as exc:
                fail(exc, kwargs.get("registry"))
            except DBAPIError as exc:  # the registry's server failed mid-command (gone, refused): not a bug of ours
                reason = " ".join(str(exc.orig).split())
                fail(RegistryError(f"registry error: {reason}; check the server and retry"), kwargs.get("registry"))
            except KeyboardInterrupt:
                err_console.print(interrupted)
                raise typer.Exit(130) from None

        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def fail(error: FedbenchError, registry: str | None = None) -> NoReturn:
    """Print a user error on one line and exit with its code (2). The text is scrubbed of the password of the
    registry URL in use (``registry``, else $FEDBENCH_REGISTRY) and of any other ``user:password@``."""
    from fedbench.registry import default_registry_url
    from fedbench.urls import scrub

    message = scrub(str(error), registry or default_registry_url())
    err_console.print(f"[red]error:[/red] {escape(one_line(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(error.exit_code) from None


def note_unmatched(store: Any, registry: str | None, paper: str | None, recipe: str | None = None) -> None:
    """After a listing that ``--paper``/``--recipe`` left empty: a note on stderr for each name the registry ``store``
    has no run of, with the names it has, so a misspelt paper does not read as "no runs yet"."""
    groups = store.status_counts()
    for what, value, known in (
        ("paper", paper, {group.paper for group in groups}),
        ("recipe", recipe, {group.recipe for group in groups}),
    ):
        if value is not None and value not in known:
            names = ", ".join(sorted(name for name in known if name)) or "none"
            err_console.print(
                f"[yellow]note:[/yellow] no run of {what} {escape(repr(value))} in "
                f"{escape(store.shown_url(registry))}; its {what}s: {escape(names)}",
                highlight=False,
                soft_wrap=True,
            )


def one_line(message: str) -> str:
    """``message`` with its line breaks (and the other characters a terminal breaks lines at) escaped, so a key
    or value quoted in it (a recipe key holding a newline) cannot spread an error over several lines."""
    return "".join(
        ch if ch.isprintable() or ch == " " else ch.encode("unicode_escape").decode("ascii") for ch in message
    )


def print_json(data: Any, indent: int = 2) -> None:
    """Machine-readable output: JSON on stdout, nothing else (see docs/cli.md)."""
    sys.stdout.write(json.dumps(data, indent=indent, default=str) + "\n")


def labels_text(labels: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (labels or {}).items())


def labels_lines(labels: dict[str, Any] | None) -> str:
    """A run's labels one KEY=VALUE per line: a listing's ``whole`` column, never cut inside a label."""
    return "\n".join(f"{k}={v}" for k, v in (labels or {}).items())


__all__ = [
    "console",
    "err_console",
    "print_listing",
    "user_errors",
    "fail",
    "note_unmatched",
    "print_json",
    "labels_text",
    "labels_lines",
    "RegistryOption",
    "parse_assignments",
    "label_filters",
]
