"""One run for a person (fedbench/report/run_view.py): the settings that differ from their defaults, the sparkline,
the sampled curve and the provenance lines."""

from __future__ import annotations

from pathlib import Path

from fedbench.recipes.expand import compile_recipes
from fedbench.report.run_view import (
    CURVE_ROWS,
    changed_settings,
    curve_sample,
    provenance_lines,
    result_line,
    sparkline,
)

QUICKSTART = Path(__file__).resolve().parents[2] / "recipes" / "quickstart.toml"


def quickstart_spec(algorithm: str) -> dict:
    planned = [p for p in compile_recipes([QUICKSTART]) if p.spec.algorithm == algorithm]
    return planned[0].spec.model_dump(mode="json")


def test_the_settings_shown_are_those_the_recipe_changed_from_every_default():
    """quickstart.toml sets the partition's alpha and min_size (min_size = 10 is Dirichlet's default), 20 rounds,
    SGD with lr 0.05 and momentum 0.9, and FedProx's mu = 0.1 (its default is 0.01); the rest is at its default."""
    settings = dict(changed_settings(quickstart_spec("fedprox")))
    assert list(settings)[:4] == ["algorithm", "dataset", "model", "partition"]
    assert settings == {
        "algorithm": "fedprox",
        "dataset": "digits",
        "model": "digits_cnn",
        "partition": "dirichlet",
        "algorithm_params.mu": 0.1,
        "partition_params.alpha": 0.3,
        "rounds": 20,
        "optimizer.lr": 0.05,
        "optimizer.momentum": 0.9,
    }
    assert "algorithm_params.mu" not in dict(changed_settings(quickstart_spec("fedavg")))


def test_an_unknown_plugin_shows_all_its_parameters():
    spec = {**quickstart_spec("fedavg"), "algorithm": "a-method-from-elsewhere", "algorithm_params": {"beta": 2}}
    assert dict(changed_settings(spec))["algorithm_params.beta"] == 2


def test_sparkline_spans_lowest_to_highest_and_keeps_its_width():
    assert sparkline([]) == ""
    assert sparkline([0.1, 0.5, 0.9]) == "▁▅█"
    assert sparkline([0.3, 0.3]) == "▁▁"  # a flat curve
    long = sparkline([float(i) for i in range(500)], width=40)
    assert len(long) == 40 and long[0] == "▁" and long[-1] == "█"


def test_curve_sample_keeps_first_last_and_at_most_the_rows():
    curve = [{"round": r} for r in range(1, 201)]
    sample = curve_sample(curve)
    assert len(sample) == CURVE_ROWS and sample[0]["round"] == 1 and sample[-1]["round"] == 200
    assert [e["round"] for e in sample] == sorted({e["round"] for e in sample})
    assert curve_sample(curve[:3]) == curve[:3]


def test_result_and_provenance_lines():
    summary = {"best": 0.5, "best_round": 7, "final": 0.25, "last5_mean": 0.4, "rounds_to_target": {"90": None}}
    assert result_line(summary) == [
        "best 50.00 (round 7)",
        "final 25.00",
        "mean of last 5 40.00",
        "rounds to 90 %: not reached",
    ]
    assert result_line({}) == []
    # a run that evaluates only the clients' own models has no global figures: it says so, not "best –"
    personal_only = {"best": None, "best_round": None, "final": None, "last5_mean": None, "evaluated_rounds": 0}
    assert result_line(personal_only, "personal") == [
        "not evaluated: eval_mode = personal scores each client's model on its own split (personal_* curves)"
    ]
    assert result_line(personal_only)[0] == "best – (round –)"  # a global run without an evaluated round yet
    assert result_line(summary, "personal") == result_line(summary)  # evaluated: its figures, whatever the mode
    software, data, training = provenance_lines(
        {
            "fedbench_version": "0.1.0",
            "git_commit": "abcdef0123",
            "git_dirty": False,
            "data": {"source": "s", "verified": True, "client_sizes": [3, 9, 5], "num_params": 1234},
            "packing": {"executor": "packed"},
            "peak_memory": {"bytes": 3 * 2**20},
        }
    )
    assert software[0] == "fedbench 0.1.0 (git abcdef0)"
    assert "3 clients, 3–9 samples each" in data and "1,234 parameters" in data
    assert training == ["packed training", "fp32", "peak memory 3.0 MiB"]
    assert provenance_lines(None) == []


def test_own_data_is_shown_by_its_manifests_digest():
    """The own-data loaders record no source but a content manifest; ``show`` names its path, files and digest (what
    `fedbench datasets check` prints and `dataset_params.digest` pins) instead of "data ?, not verified"."""
    digest = "ab" * 32
    manifest = {"path": "/data/xrays", "sha256": digest, "files": 12, "bytes": 3400, "listed": True}
    _, unpinned, _ = provenance_lines({"data": {"manifest": manifest, "verified": False, "client_sizes": [4, 8]}})
    assert unpinned[:3] == ["data /data/xrays", f"12 files, sha256 {digest}", "digest not pinned"]
    assert "?" not in " ".join(unpinned)
    _, pinned, _ = provenance_lines({"data": {"manifest": manifest, "verified": True}})
    assert pinned == ["data /data/xrays", f"12 files, sha256 {digest}", "digest pinned"]
    _, unverified, _ = provenance_lines({"data": {"manifest": None, "verified": False, "source": "s"}})
    assert unverified == ["data s, not verified"]  # --no-verify: nothing hashed, as for a built-in


def test_published_files_are_shown_with_the_digests_they_matched():
    """A loader of published files records no source but each file and its digest (``data.files.verify_files``);
    ``show`` names them instead of "data ?"."""
    md5, sha256 = "68e3f8846a6bd62f0c9bf841c0d9eacc", "cd" * 32
    data = {"files": ["a.npz", "b.tar"], "digests": {"a.npz": md5, "b.tar": sha256}, "verified": True}
    _, shown, _ = provenance_lines({"data": data})
    assert shown[0] == f"data a.npz md5 {md5}, b.tar sha256 {sha256}, verified"
    _, skipped, _ = provenance_lines({"data": {"files": ["a.npz"], "verified": False}})  # --no-verify: no digests
    assert skipped[0] == "data a.npz, not verified"
