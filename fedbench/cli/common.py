"""What every command shares: the consoles, the one error handler, JSON output and the common options.

``user_errors`` is the only place that turns errors into exit codes: a ``FedbenchError`` becomes one line on
stderr and exit code 2; Ctrl-C becomes a hint and exit code 130; anything else is a bug and keeps its traceback.
``KEY=VALUE`` options are parsed by ``fedbench.assignments`` (TOML values), re-exported here for the commands.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar, overload

import typer
from rich.console import Console
from rich.markup import escape

from fedbench.assignments import label_filters, parse_assignments
from fedbench.errors import FedbenchError

console = Console()
err_console = Console(stderr=True)

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
                fail(exc)
            except KeyboardInterrupt:
                err_console.print(interrupted)
                raise typer.Exit(130) from None

        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def fail(error: FedbenchError) -> NoReturn:
    """Print a user error on one line and exit with its code (2)."""
    err_console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
    raise typer.Exit(error.exit_code) from None


def print_json(data: Any, indent: int = 2) -> None:
    """Machine-readable output: JSON on stdout, nothing else (see docs/cli.md)."""
    sys.stdout.write(json.dumps(data, indent=indent, default=str) + "\n")


def labels_text(labels: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (labels or {}).items())


__all__ = [
    "console",
    "err_console",
    "user_errors",
    "fail",
    "print_json",
    "labels_text",
    "RegistryOption",
    "parse_assignments",
    "label_filters",
]
