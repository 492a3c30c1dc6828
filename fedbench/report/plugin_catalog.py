"""The plug-in registries as plain data, for ``fedbench algorithms`` and ``fedbench models`` (tables or JSON).

Data sets have their own listing in ``fedbench.data.catalog``.
"""

from __future__ import annotations

from typing import Any

from fedbench.algorithms import ALGORITHMS, params_class


def algorithm_entries() -> list[dict[str, Any]]:
    """Every registered FL method: name, hyperparameters with their defaults, papers, one-line description, and the
    setting in which it trains as FedAvg (``fedavg_setting``, None where it declares none: the engine contract's
    ``fedavg-setting`` check, ``fedbench check-method``)."""
    entries = []
    for name in ALGORITHMS.names():  # read from the catalogue and the methods' sources: no method is imported
        params = {k: f.default for k, f in params_class(name).model_fields.items()}
        doc = ALGORITHMS.doc(name).strip().splitlines()
        entries.append(
            {
                "name": name,
                "params": params,
                "papers": list(ALGORITHMS.info(name).get("papers", ())),
                "description": doc[0] if doc else "",
                "fedavg_setting": ALGORITHMS.info(name).get("fedavg_setting"),
            }
        )
    return entries


def model_entries(name: str | None = None, overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Model cards (parameters, FLOPs per sample, input shape, classes, papers): of every registered model at its
    paper configuration, or of ``name`` alone with ``overrides`` (``num_classes``, ``input_shape``, model parameters)."""
    # local: a card counts the parameters and FLOPs of the built model (torch); keeps torch out of `algorithms`
    from fedbench.cost import model_card, model_cards

    if not name:
        return model_cards()
    return [model_card(name, **(overrides or {}))]


__all__ = ["algorithm_entries", "model_entries"]
