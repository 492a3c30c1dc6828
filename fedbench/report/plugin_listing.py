"""The plug-in registries as plain data, for ``fedbench algorithms`` and ``fedbench models`` (tables or JSON).

Data sets have their own listing in ``fedbench.data.provision``.
"""

from __future__ import annotations

from typing import Any

from fedbench.algorithms import ALGORITHMS, params_class
from fedbench.errors import ConfigError

METHOD_KINDS = ("global", "personal")


def algorithm_entries(kind: str | None = None, paper: str | None = None) -> list[dict[str, Any]]:
    """Every registered FL method: name, kind (``global``: one global model; ``personal``: clients evaluated with
    models of their own; the catalogue's ``kind``), hyperparameters with their defaults, papers, one-line description,
    and the setting in which it trains as FedAvg (``fedavg_setting``, None where it declares none: the engine
    contract's ``fedavg-setting`` check, ``fedbench check-method``). ``kind`` and ``paper`` keep only the methods of
    that kind, or whose papers include ``paper``; a value no method has is a ConfigError naming those there are."""
    entries = []
    for name in ALGORITHMS.names():  # read from the catalogue and the methods' sources: no method is imported
        params = {k: f.default for k, f in params_class(name).model_fields.items()}
        doc = ALGORITHMS.doc(name).strip().splitlines()
        info = ALGORITHMS.info(name)
        entries.append(
            {
                "name": name,
                "kind": info.get("kind", "global"),
                "params": params,
                "papers": list(info.get("papers", ())),
                "description": doc[0] if doc else "",
                "fedavg_setting": info.get("fedavg_setting"),
            }
        )
    papers = sorted({p for e in entries for p in e["papers"]})
    if kind is not None:
        if kind not in METHOD_KINDS:
            raise ConfigError(f"--kind {kind!r}: expected one of {', '.join(METHOD_KINDS)}")
        entries = [e for e in entries if e["kind"] == kind]
    if paper is not None:
        if paper not in papers:
            raise ConfigError(
                f"--paper {paper!r}: no method listed is of that paper; the papers are {', '.join(papers)}"
            )
        entries = [e for e in entries if paper in e["papers"]]
    return entries


def model_entries(name: str | None = None, overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Model cards (parameters, FLOPs per sample, input shape, classes, papers): of every registered model at its
    paper configuration, or of ``name`` alone with ``overrides`` (``num_classes``, ``input_shape``, model parameters)."""
    # local: a card counts the parameters and FLOPs of the built model (torch); keeps torch out of `algorithms`
    from fedbench.cost import model_card, model_cards

    if not name:
        return model_cards()
    return [model_card(name, **(overrides or {}))]


__all__ = ["METHOD_KINDS", "algorithm_entries", "model_entries"]
