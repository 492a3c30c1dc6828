"""One run as data, for ``fedbench runs --json`` and ``fedbench show``: the run row, and its per-round curve
with every stored field and every catalogue metric (docs/cli.md lists the fields; a test checks the list)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedbench.errors import FedbenchError, RegistryError
from fedbench.registry import Registry
from fedbench.vocab.metrics import METRICS, ROUND_FIELDS, format_percent, metric_value
from fedbench.vocab.summary import stored_summary

# A curve entry: every stored round field (storage order), then the metrics read from per-client values
# (e.g. personal_auc, the mean over clients of personal_metrics["auc"]), so every metric a recipe may name
# has its own key.
DERIVED_METRICS: tuple[str, ...] = tuple(name for name, m in METRICS.items() if m.column is None)
CURVE_FIELDS: tuple[str, ...] = (*ROUND_FIELDS, *DERIVED_METRICS)


def round_json(row: Any) -> dict[str, Any]:
    """One stored round (a ``rounds`` row) as a JSON object with the keys ``CURVE_FIELDS``."""
    data = {name: getattr(row, name) for name in ROUND_FIELDS}
    data.update({name: metric_value(row, name) for name in DERIVED_METRICS})
    return data


def run_json(row: Any, curve: Sequence[Any] | None = None) -> dict[str, Any]:
    """A run (a ``runs`` row) as ``fedbench runs --json`` prints it; with ``curve`` (its ``rounds`` rows) as
    ``fedbench show --json`` prints it."""
    data = {
        "id": row.id,
        "spec_hash": row.spec_hash,
        "paper": row.paper,
        "recipe": row.recipe,
        "labels": row.labels,
        "status": row.status,
        "seed": row.seed,
        "scale": row.scale,
        "synthetic": row.synthetic,
        "rounds_done": row.rounds_done,
        "diverged_round": row.diverged_round,
        "error": row.error,
        "wall_seconds": row.wall_seconds,
        "summary": row.summary,
        "spec": row.spec,
        "provenance": row.provenance,
        "started_at": row.started_at.isoformat() if row.started_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }
    if curve is not None:
        data["curve"] = [round_json(r) for r in curve]
    return data


def run_details(registry: Any, run: str | int) -> dict[str, Any]:
    """What ``fedbench show RUN --json`` prints: the run (id or spec_hash prefix) with its curve.
    Raises the registry's error for an unknown run."""
    row = registry.get_run(run)
    return run_json(row, registry.curve(row.id))


def run_list(
    registry_url: str | None, paper: str | None = None, status: str | None = None
) -> list[dict[str, Any]] | None:
    """What ``fedbench runs`` lists: the registry's runs (of one paper / in one status) as ``run_json`` objects;
    None when there is no registry at ``registry_url`` (it is not created)."""
    store = Registry.open_existing(registry_url)
    if store is None:
        return None
    return [run_json(row) for row in store.runs(paper=paper, status=status)]


def show_run(registry_url: str | None, run: str) -> dict[str, Any]:
    """What ``fedbench show RUN`` prints: ``run_details`` of the registry at ``registry_url`` (not created)."""
    store = Registry.open_existing(registry_url)
    if store is None:
        raise RegistryError(f"no registry at {Registry.shown_url(registry_url)}; run a recipe first")
    return run_details(store, run)


def curve_table(curve: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The terminal table of ``fedbench show``: round, every catalogue metric the run recorded (a value in at
    least one round; values as stored: fractions, not %) and seconds per round."""
    names = [name for name in METRICS if any(entry.get(name) is not None for entry in curve)]
    headers = ["round", *names, "s"]

    def text(value: Any, digits: int = 4) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    rows = [
        [str(entry["round"]), *(text(entry.get(name)) for name in names), text(entry.get("wall_seconds"), 2)]
        for entry in curve
    ]
    return headers, rows


# ------------------------------------------------------------------------------------- fedbench show, for a person
# What a person looks for first in one run: who it is, what was set, what it reached, how it went, where it ran.
# ``--spec`` prints the whole resolved spec and ``--json`` everything.

IDENTITY_SETTINGS = ("algorithm", "dataset", "model", "partition")  # always shown, first
NOT_SETTINGS = frozenset({"seed", "scale", "synthetic", "neutral_params", "algorithm_revision"})  # shown elsewhere
CURVE_ROWS = 8  # rounds in the small curve table: the first, the last and evenly spaced ones between
SPARK = "▁▂▃▄▅▆▇█"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """``value`` (a spec's JSON) as {dotted key: leaf value}; an empty dict is a leaf."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flat(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def changed_settings(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """The settings of a stored spec that differ from their defaults (``RunSpec``'s, and each plug-in's own for its
    parameters), as (dotted key, value): the algorithm, data set, model and partition always, first."""
    # local: the spec schema and plug-in catalogues (pydantic; no torch) are needed only by `show`
    from fedbench.recipes.resolve import non_default
    from fedbench.spec import PLUGIN_KINDS, RunSpec

    defaults = _flat(RunSpec(algorithm="", dataset="", model="").model_dump(mode="json"))
    plugin_params = {f"{kind}_params" for kind in PLUGIN_KINDS}
    changed: list[tuple[str, Any]] = [(key, spec.get(key)) for key in IDENTITY_SETTINGS]
    for key, value in spec.items():
        if key in IDENTITY_SETTINGS or key in NOT_SETTINGS:
            continue
        if key in plugin_params and isinstance(value, dict):
            kind = key.removesuffix("_params")
            try:
                value = non_default(kind, spec[kind], value)
            except FedbenchError:  # a plug-in this fedbench does not know (any more): all its parameters
                pass
            changed += [(f"{key}.{name}", item) for name, item in sorted(value.items())]
            continue
        changed += [(name, item) for name, item in _flat(value, f"{key}.").items() if defaults.get(name) != item]
    return changed


SPARK_WIDTH = 60  # characters at most: a longer curve is shown by evenly spaced values, the first and last among them


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """``values`` as a line of block characters, lowest ▁ to highest █; at most ``width`` of them (evenly spaced
    values, the first and the last included)."""
    if not values:
        return ""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(SPARK[round((v - low) / span * (len(SPARK) - 1))] for v in values)


def curve_sample(curve: Sequence[dict[str, Any]], rows: int = CURVE_ROWS) -> list[dict[str, Any]]:
    """At most ``rows`` entries of ``curve``: the first, the last and evenly spaced ones between."""
    if len(curve) <= rows:
        return list(curve)
    picks = sorted({round(i * (len(curve) - 1) / (rows - 1)) for i in range(rows)})
    return [curve[i] for i in picks]


def result_line(stored: dict[str, Any] | None, eval_mode: str = "global") -> list[str]:
    """The stored summary figures of the global model's test accuracy (%), in the figure catalogue's words; for a
    run that evaluates only each client's own model (``eval_mode = "personal"``), which has no such figures, a line
    that says so rather than a row of blanks."""
    summary = stored_summary(stored)
    if summary is None:
        return []
    if eval_mode == "personal" and summary["best"] is None:
        return ["not evaluated: eval_mode = personal scores each client's model on its own split (personal_* curves)"]
    parts = [
        f"best {format_percent(summary['best'])} (round {summary['best_round'] or '–'})",
        f"final {format_percent(summary['final'])}",
        f"mean of last 5 {format_percent(summary['last5_mean'])}",
    ]
    for target, reached in summary["rounds_to_target"].items():
        parts.append(f"rounds to {target} %: {reached if reached is not None else 'not reached'}")
    return parts


def data_identity(data: dict[str, Any]) -> list[str]:
    """What data the run read: a team's own data by its content manifest (``fedbench.data.own``: the path, the
    files and the digest that ``fedbench datasets check`` prints and ``dataset_params.digest`` pins), a built-in data
    set by its source and whether its files matched the published checksums."""
    manifest = data.get("manifest")
    if not manifest:
        checked = ", verified" if data.get("verified") else ", not verified"
        if "source" in data or not data.get("files"):
            return [f"data {data.get('source', '?')}" + checked]
        # a loader of published files (``data.files.verify_files``): each file, with the digest it matched
        # local: importing fedbench.data registers every loader (numpy, the spec), which `fedbench runs` never needs
        from fedbench.data.files import digest_algorithm

        digests = data.get("digests") or {}
        return [
            "data "
            + ", ".join(
                f"{name} {digest_algorithm(digests[name])} {digests[name]}" if name in digests else name
                for name in data["files"]
            )
            + checked
        ]
    return [
        f"data {manifest.get('path', '?')}",
        f"{manifest.get('files', '?')} files, sha256 {manifest.get('sha256', '?')}",
        "digest pinned" if data.get("verified") else "digest not pinned",
    ]


def provenance_lines(provenance: dict[str, Any] | None) -> list[list[str]]:
    """Where and how the run was trained, in three lines: software and machine; data; training path and memory."""
    p = provenance or {}
    if not p:
        return []
    git = p.get("git_commit")
    software = [
        f"fedbench {p.get('fedbench_version', '?')}"
        + (f" (git {git[:7]}{', uncommitted changes' if p.get('git_dirty') else ''})" if git else ""),
        f"python {p.get('python', '?')}",
        f"torch {p.get('torch', '?')}",
        str(p.get("device", "?")),
        f"host {p.get('host', '?')}",
    ]
    data = p.get("data") or {}
    sizes = data.get("client_sizes") or []
    data_line = [
        *data_identity(data),
        *([f"partition {data['partition_fingerprint']}"] if data.get("partition_fingerprint") else []),
        *([f"{len(sizes)} clients, {min(sizes)}–{max(sizes)} samples each"] if sizes else []),
        *([f"{data['num_params']:,} parameters"] if data.get("num_params") else []),
        *([f"resumed from round {data['resumed_from']}"] if data.get("resumed_from") else []),
    ]
    packing = p.get("packing") or {}
    memory = p.get("peak_memory") or {}
    training = [
        *([f"{packing['executor']} training"] if packing.get("executor") else []),
        str(p.get("precision", "fp32")),
        *([f"peak memory {memory['bytes'] / 2**20:.1f} MiB"] if memory.get("bytes") else []),
    ]
    return [software, data_line, training]
