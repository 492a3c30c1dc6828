"""Keys of a run's stored provenance that more than one layer reads: ``execution.provenance`` writes them when a run
trains, the report reads them back (LG-Mix Table 9's peak memory) without importing the code that measured them."""

from __future__ import annotations

from typing import Any

PEAK_MEMORY = "peak_memory"  # the provenance key of a run's peak memory (``execution.provenance.PeakMemory.result``)
# Where a cluster worker trained the run, to find its job log or node (``execution.provenance.slurm_info``/``ray_info``)
SLURM = "slurm"  # {"job_id", "array_job_id", "array_task_id", "restart_count", "node"}
RAY = "ray"  # {"node_id", "node_ip", "resources", "gpu_ids"}


def peak_memory(provenance: dict[str, Any] | None) -> tuple[int | None, str]:
    """(bytes, measure) of a run's recorded peak memory; (None, "n/a") where the run has none (trained before
    fedbench recorded it, or not measurable)."""
    entry = (provenance or {}).get(PEAK_MEMORY) or {}
    return entry.get("bytes"), entry.get("measure", "n/a")
