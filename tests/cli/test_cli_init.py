"""``fedbench.cli.main``: a mistake on the command line is one line on stderr and exit code 2, like every user error;
help, success and the codes commands exit with come through unchanged."""

from __future__ import annotations

import sys

import pytest
import typer

from fedbench.cli import app, main


def run_main(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """(exit code, stderr) of ``fedbench ARGV`` run through ``main``, as the installed command runs it."""
    monkeypatch.setattr(sys, "argv", ["fedbench", *argv])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code, capsys.readouterr().err  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["runs", "--bogus"], ["--bogus", "'fedbench runs --help'"]),
        (["runs", "--pap", "x"], ["--pap", "--paper", "'fedbench runs --help'"]),  # click's suggestion kept
        (["run"], ["Missing argument", "recipes", "'fedbench run --help'"]),
        (["nope"], ["No such command", "nope", "'fedbench --help'"]),
        (["runs", "--json=x"], ["--json", "does not take a value"]),  # a flag given a value
    ],
)
def test_a_command_line_mistake_is_one_line_naming_it_and_the_help(argv, words, monkeypatch, capsys):
    code, err = run_main(argv, monkeypatch, capsys)
    assert code == 2
    assert err.startswith("error: ")
    assert err.count("\n") == 1  # one line, no usage block and no panel
    for word in words:
        assert word in err


def test_help_and_no_command_print_the_help(monkeypatch, capsys):
    code, _ = run_main(["--help"], monkeypatch, capsys)
    assert code == 0
    code, _ = run_main([], monkeypatch, capsys)
    assert code == 2  # no command: the help, and the exit code of a usage error, as Typer gives it


def test_a_command_exit_code_comes_through(monkeypatch, capsys, tmp_path):
    registry = f"sqlite:///{tmp_path / 'none.db'}"
    code, err = run_main(["show", "1", "--registry", registry], monkeypatch, capsys)
    assert code == 2 and "no registry" in err  # a FedbenchError's exit, raised as typer.Exit inside the command
    code, _ = run_main(["algorithms", "--json"], monkeypatch, capsys)
    assert code == 0


def test_a_command_returning_normally_exits_zero(monkeypatch, capsys):
    probe = typer.Typer()

    @probe.command()
    def value() -> str:
        return "not an exit code"

    @probe.command()
    def other() -> None:
        raise typer.Exit(130)

    monkeypatch.setattr("fedbench.cli.app", probe)
    assert run_main(["value"], monkeypatch, capsys)[0] == 0
    assert run_main(["other"], monkeypatch, capsys)[0] == 130
    assert app is not probe  # the real app is untouched outside this test
