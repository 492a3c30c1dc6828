"""The ``fedbench datasets`` command group: list, info, check, download, prepare (library: ``fedbench.data.provision``).

Output is a rich table or text, or JSON with ``--json``. ``--param KEY=VALUE`` takes TOML values, as ``run --set``
does (``fedbench.recipes.assignments``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from fedbench.cli import completion
from fedbench.cli.common import console, err_console, parse_assignments, print_json, print_listing, user_errors
from fedbench.cli.options import Plugins, load_plugins
from fedbench.errors import FedbenchError

PARAM_HELP = "dataset parameter KEY=VALUE (TOML value, else a plain string), repeatable, e.g. -p image_size=64"
INTERRUPTED = "interrupted"
DOWNLOAD_INTERRUPTED = "interrupted: partly downloaded files are kept; run the same command again to resume"

DataDir: Any = typer.Option(None, "--data-dir", help="data root (default: $FEDBENCH_DATA or the user cache directory)")
AsJson: Any = typer.Option(False, "--json", help="print JSON instead of a table")
NoVerify: Any = typer.Option(False, "--no-verify", help="skip checksum verification")
Params: Any = typer.Option(None, "--param", "-p", help=PARAM_HELP)
DatasetName = Annotated[str, typer.Argument(help="A registered data set.", autocompletion=completion.datasets)]
# What the command itself passes the loader: a --param of one of these names would reach it twice
NOT_PARAMS = {"root": "--data-dir", "verify": "--no-verify", "name": "NAME", "use_prepared": "`datasets prepare`"}

app = typer.Typer(help="List, inspect, verify, download and prepare datasets.", no_args_is_help=True)


@app.command("list")
@user_errors(interrupted=INTERRUPTED)
def list_command(data_dir: str | None = DataDir, as_json: bool = AsJson, plugin: Plugins = []) -> None:  # noqa: B006
    """Every registered dataset: classes, input shape, natural groups, papers, and whether its files are present."""
    from fedbench.data.provision import list_datasets

    load_plugins(plugin)
    rows = list_datasets(data_dir)
    if as_json:
        print_json(rows, indent=1)
        return
    entries = [
        [
            row["name"],
            str(row["classes"]),
            "×".join(map(str, row["shape"])),
            row["groups"] or "",
            ", ".join(row["used_by"]),
            "[green]yes[/green]" if row["present"] else "[dim]no[/dim]",
        ]
        for row in rows
    ]
    print_listing(None, ("dataset", "classes", "shape", "groups", "used by", "present"), entries)


@app.command("info")
@user_errors(interrupted=INTERRUPTED)
def info_command(
    name: DatasetName,
    data_dir: str | None = DataDir,
    as_json: bool = AsJson,
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """Files needed, on-disk layout, checksums, licence and how to get the data."""
    from fedbench.data.provision import dataset_info

    load_plugins(plugin)
    info = dataset_info(name, data_dir)
    if as_json:
        print_json(info, indent=1)
        return
    meta = info["meta"]
    console.print(
        f"[bold]{name}[/bold]: {meta['num_classes']} classes, input {tuple(meta['input_shape'])}, "
        f"used by {', '.join(meta['used_by']) or '-'}"
        + (f", groups = {meta['group_kind']}" if meta["group_kind"] else "")
    )
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


@app.command("check")
@user_errors(interrupted=INTERRUPTED)
def check_command(
    name: DatasetName,
    data_dir: str | None = DataDir,
    no_verify: bool = NoVerify,
    param: list[str] | None = Params,
    as_json: bool = AsJson,
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """Verify checksums, load the data and print counts per split, class and group."""
    from fedbench.data.provision import check_dataset

    load_plugins(plugin)
    params = dataset_params(param)
    report = check_dataset(name, data_dir, verify=not no_verify, **params)
    if as_json:
        print_json(report, indent=1)
        return
    console.print(
        f"[bold]{name}[/bold]: {report['train']} train / {report['test']} test, "
        f"shape {tuple(report['shape'])} {report['dtype']}, loaded in {report['seconds']} s"
    )
    console.print(f"verified: {report['verified']} ({report['verification']})")
    if "content" in report:
        content = report["content"]
        console.print(
            f"content: {content['files']} files, {content['bytes']} bytes under {escape(content['path'])}, "
            f"sha256 {content['sha256']} (pin it: -p digest=… / dataset_params.digest)",
            soft_wrap=True,
        )
    for warning in report["warnings"]:
        err_console.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
    if "counts_match" in report:
        console.print(
            f"official counts {tuple(report['expected_counts'])}: "
            + ("[green]match[/green]" if report["counts_match"] else "[yellow]differ[/yellow]")
        )
    if "class_names" in report:
        console.print(f"classes: {escape(', '.join(report['class_names']))}", soft_wrap=True)
    if "train_class_counts" in report:
        console.print(f"train per class: {report['train_class_counts']}")
    if "groups" in report:
        shown = list(report["groups"].items())[:20]
        console.print(
            f"{len(report['groups'])} groups: "
            + ", ".join(f"{k}={v}" for k, v in shown)
            + (" …" if len(report["groups"]) > 20 else "")
        )


@app.command("download")
@user_errors(interrupted=DOWNLOAD_INTERRUPTED)
def download_command(name: DatasetName, data_dir: str | None = DataDir, plugin: Plugins = []) -> None:  # noqa: B006
    """Fetch the official files (resumable, checksum-verified) into the data root, laid out as unpacked."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TransferSpeedColumn

    from fedbench.data.provision import download_dataset

    load_plugins(plugin)
    with Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn()
    ) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(path: str, done: int, total: int | None) -> None:
            if path not in tasks:
                tasks[path] = bar.add_task(path, total=total)
            bar.update(tasks[path], completed=done, total=total)

        result = download_dataset(name, data_dir, progress)
    console.print(
        f"{name}: {len(result['fetched'])} fetched, {len(result['already_present'])} already present "
        f"in {result['folder']}"
    )


@app.command("prepare")
@user_errors(interrupted=INTERRUPTED)
def prepare_command(
    name: DatasetName,
    data_dir: str | None = DataDir,
    no_verify: bool = NoVerify,
    param: list[str] | None = Params,
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """Decode the dataset once into a memory-mapped array cache that later runs load instantly."""
    from fedbench.data.provision import prepare_dataset

    load_plugins(plugin)
    params = dataset_params(param)
    result = prepare_dataset(name, data_dir, verify=not no_verify, **params)
    console.print(
        f"{name}: {result['train']} train / {result['test']} test → {result['cache']} "
        f"({result['bytes'] / 2**20:.1f} MiB, {result['seconds']} s)"
    )


def dataset_params(param: list[str] | None) -> dict[str, Any]:
    """``--param KEY=VALUE`` pairs: the data set's own parameters, none of which the command sets another way."""
    params = parse_assignments(param or [], "--param")
    clashes = sorted(params.keys() & NOT_PARAMS.keys())
    if clashes:
        key = clashes[0]
        raise FedbenchError(f"--param {key}: not a parameter of the data set; {NOT_PARAMS[key]} sets it")
    return params


def register_cli(parent: typer.Typer) -> typer.Typer:
    """Add the ``datasets`` group to ``parent`` (the main app, or a test's own)."""
    parent.add_typer(app, name="datasets")
    return app
