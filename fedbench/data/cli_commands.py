"""The ``fedbench datasets`` command group: list, info, check, download, prepare.

``register_cli(app)`` adds it to the main Typer app. Output is a rich table, or JSON with ``--json``.
User errors (missing or corrupt data, unknown names, bad parameters) print one line and exit with code 2.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

import typer

from fedbench.errors import FedbenchError

PARAM_HELP = "dataset parameter KEY=VALUE (JSON value or plain string), repeatable, e.g. -p size=64"


def parse_params(pairs: list[str] | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {pair!r}")
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value
    return params


def _console():
    from rich.console import Console

    return Console()


def _fail(error: FedbenchError) -> None:
    from rich.console import Console

    from rich.markup import escape

    Console(stderr=True).print(f"[red]error:[/red] {escape(str(error))}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(code=getattr(error, "exit_code", 2))


def _run(action: Callable[[], Any]) -> Any:
    try:
        return action()
    except FedbenchError as error:
        _fail(error)


DataDir = typer.Option(None, "--data-dir", help="data root (default: $FEDBENCH_DATA or the user cache directory)")
AsJson = typer.Option(False, "--json", help="print JSON instead of a table")


def register_cli(app: typer.Typer) -> typer.Typer:
    datasets = typer.Typer(help="List, inspect, verify, download and prepare datasets.", no_args_is_help=True)
    app.add_typer(datasets, name="datasets")

    @datasets.command("list")
    def list_command(data_dir: Optional[str] = DataDir, as_json: bool = AsJson) -> None:
        """Every registered dataset: classes, input shape, natural groups, papers, and whether its files are present."""
        from fedbench.data.catalog import list_datasets

        rows = _run(lambda: list_datasets(data_dir))
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
            return
        from rich.table import Table

        table = Table("dataset", "classes", "shape", "groups", "used by", "present")
        for row in rows:
            table.add_row(row["name"], str(row["classes"]), "×".join(map(str, row["shape"])), row["groups"] or "",
                          ", ".join(row["used_by"]), "[green]yes[/green]" if row["present"] else "[dim]no[/dim]")
        _console().print(table)

    @datasets.command("info")
    def info_command(name: str, data_dir: Optional[str] = DataDir, as_json: bool = AsJson) -> None:
        """Files needed, on-disk layout, checksums, licence and how to get the data."""
        from fedbench.data.catalog import dataset_info

        info = _run(lambda: dataset_info(name, data_dir))
        if as_json:
            typer.echo(json.dumps(info, indent=1, default=str))
            return
        console = _console()
        meta = info["meta"]
        console.print(f"[bold]{name}[/bold]: {meta['num_classes']} classes, input {tuple(meta['input_shape'])}, "
                      f"used by {', '.join(meta['used_by']) or '-'}" + (f", groups = {meta['group_kind']}" if meta["group_kind"] else ""))
        console.print(f"folder:  {info['folder']} ({'present' if info['present'] else 'missing'})")
        console.print(f"layout:  {info['layout']}")
        console.print(f"get it:  {info['how_to_get']}")
        if info["license"]:
            console.print(f"licence: {info['license']}")
        for entry in info["files"]:
            mark = "[green]✓[/green]" if entry["present"] else "[red]✗[/red]"
            console.print(f"  {mark} {entry['path']}  {entry['checksum'] or '(no published checksum)'}")
        for item in info["downloads"]:
            console.print(f"  download {item['url']} → {item['path']}" + (f"  md5 {item['md5']}" if item["md5"] else ""))
        for note in info["notes"]:
            console.print(f"  note: {note}")

    @datasets.command("check")
    def check_command(name: str, data_dir: Optional[str] = DataDir,
                      no_verify: bool = typer.Option(False, "--no-verify", help="skip checksum verification"),
                      param: Optional[list[str]] = typer.Option(None, "--param", "-p", help=PARAM_HELP),
                      as_json: bool = AsJson) -> None:
        """Verify checksums, load the data and print counts per split, class and group."""
        from fedbench.data.catalog import check_dataset

        report = _run(lambda: check_dataset(name, data_dir, verify=not no_verify, **parse_params(param)))
        if as_json:
            typer.echo(json.dumps(report, indent=1))
            return
        console = _console()
        console.print(f"[bold]{name}[/bold]: {report['train']} train / {report['test']} test, "
                      f"shape {tuple(report['shape'])} {report['dtype']}, loaded in {report['seconds']} s")
        console.print(f"verified: {report['verified']} ({report['verification']})")
        if "counts_match" in report:
            console.print(f"official counts {tuple(report['expected_counts'])}: "
                          + ("[green]match[/green]" if report["counts_match"] else "[yellow]differ[/yellow]"))
        if "train_class_counts" in report:
            console.print(f"train per class: {report['train_class_counts']}")
        if "groups" in report:
            shown = list(report["groups"].items())[:20]
            console.print(f"{len(report['groups'])} groups: " + ", ".join(f"{k}={v}" for k, v in shown)
                          + (" …" if len(report["groups"]) > 20 else ""))

    @datasets.command("download")
    def download_command(name: str, data_dir: Optional[str] = DataDir) -> None:
        """Fetch the official files (resumable, checksum-verified) into the data root, laid out as unpacked."""
        from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

        from fedbench.data.catalog import download_dataset

        with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn()) as bar:
            tasks: dict[str, Any] = {}

            def progress(path: str, done: int, total: int | None) -> None:
                if path not in tasks:
                    tasks[path] = bar.add_task(path, total=total)
                bar.update(tasks[path], completed=done, total=total)

            result = _run(lambda: download_dataset(name, data_dir, progress))
        _console().print(f"{name}: {len(result['fetched'])} fetched, {len(result['already_present'])} already present in {result['folder']}")

    @datasets.command("prepare")
    def prepare_command(name: str, data_dir: Optional[str] = DataDir,
                        no_verify: bool = typer.Option(False, "--no-verify", help="skip checksum verification"),
                        param: Optional[list[str]] = typer.Option(None, "--param", "-p", help=PARAM_HELP)) -> None:
        """Decode the dataset once into a memory-mapped array cache that later runs load instantly."""
        from fedbench.data.catalog import prepare_dataset

        result = _run(lambda: prepare_dataset(name, data_dir, verify=not no_verify, **parse_params(param)))
        _console().print(f"{name}: {result['train']} train / {result['test']} test → {result['cache']} "
                         f"({result['bytes'] / 2**20:.1f} MiB, {result['seconds']} s)")

    return datasets
