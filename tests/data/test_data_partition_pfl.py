"""`dirichlet_pfl`: PersonalizedFL's Dirichlet partition with auxiliary workers (FedTR spec §2.2)."""

from __future__ import annotations

import numpy as np
import pytest

from fedbench.data.partition import make_partition, partition_fingerprint
from fedbench.errors import ConfigError

LABELS = np.random.default_rng(11).permutation(np.repeat(np.arange(10), 200))  # 2,000 samples


def run(num_clients=20, seed=0, labels=LABELS, **params):
    return make_partition("dirichlet_pfl", labels, None, num_clients, np.random.default_rng(seed), params)


def counts(parts, labels=LABELS):
    return np.stack([np.bincount(labels[p], minlength=10) for p in parts])


@pytest.mark.parametrize("num_clients", [1, 2, 7, 20])
def test_every_sample_exactly_once(num_clients):
    parts = run(num_clients)
    assert len(parts) == num_clients
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(LABELS)))
    assert all(np.all(np.diff(p) > 0) for p in parts)


def test_chunks_and_min_size():
    """Clients 2j and 2j+1 share one chunk of ⌊2/N·n⌋ samples; each holds ≥ half of its fair share."""
    parts = run(20, alpha=0.1)
    chunk = int(2 / 20 * len(LABELS))
    for pair in range(10):
        assert len(parts[2 * pair]) + len(parts[2 * pair + 1]) == chunk
    assert min(len(p) for p in parts) >= int(0.5 * chunk / 2)
    # odd client count: the last chunk (the remainder) belongs to the last client alone
    odd = run(7, alpha=0.1)
    assert len(odd[-1]) == len(LABELS) - 3 * int(2 / 7 * len(LABELS))


def test_deterministic_under_the_seed():
    assert partition_fingerprint(run(seed=5)) == partition_fingerprint(run(seed=5))
    assert partition_fingerprint(run(seed=6)) != partition_fingerprint(run(seed=5))


def test_label_skew_grows_as_alpha_shrinks():
    def skew(alpha):  # mean total-variation distance of a client's class mix from the global one, over seeds
        values = []
        for seed in range(3):
            c = counts(run(20, seed=seed, alpha=alpha)).astype(float)
            mix = c / c.sum(1, keepdims=True)
            values.append(0.5 * np.abs(mix - 0.1).sum(1).mean())
        return np.mean(values)

    strong, medium, mild = skew(0.05), skew(0.5), skew(100.0)
    assert strong > medium > mild
    assert mild < 0.15 and strong > 0.4


def test_bad_parameters():
    with pytest.raises(ConfigError, match="alpha"):
        run(alpha=0)
    with pytest.raises(ConfigError, match="auxiliary_workers"):
        run(auxiliary_workers=0)
    with pytest.raises(ConfigError, match="min_fraction"):
        run(min_fraction=1.5, max_tries=2)
