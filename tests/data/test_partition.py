"""Partitioners (fedbench/data/partition.py): coverage, class counts, determinism under the seed, natural groups,
client splits, and ``dirichlet_pfl``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbench.data.partition import (
    PARTITIONERS,
    _weighted_without_replacement,
    class_matched_test_sets,
    class_ordered_split,
    make_partition,
    natural_test_sets,
    partition_fingerprint,
    split_clients,
    split_indices,
)
from fedbench.errors import ConfigError

NUM_CLIENTS = 10
LABELS = np.repeat(np.arange(10), 120)  # 1,200 samples, 120 per class
LABELS = np.random.default_rng(7).permutation(LABELS)
GROUPS = np.arange(len(LABELS)) % NUM_CLIENTS  # ten natural groups

# Parameters each registered partitioner is exercised with; a new partitioner must be added here.
PARAMS = {
    "iid": {},
    "dirichlet": {"alpha": 0.3},
    "shards": {"shards_per_client": 2},
    "orthogonal": {"clusters": 5},
    "natural": {},
    "samples_per_client": {"samples_per_client": 100, "alpha": 0.5},
    "dirichlet_pfl": {"alpha": 0.3},
}


def run(name, seed=0, labels=LABELS, groups=GROUPS, num_clients=NUM_CLIENTS, **params):
    merged = {**PARAMS[name], **params}
    return make_partition(name, labels, groups, num_clients, np.random.default_rng(seed), merged)


def test_every_registered_partitioner_has_test_params():
    assert set(PARTITIONERS.names()) == set(PARAMS)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_partitioner_contract(name):
    parts = run(name)
    assert len(parts) == NUM_CLIENTS
    info = PARTITIONERS.info(name)
    for part in parts:
        assert part.dtype == np.int64
        assert np.all(np.diff(part) > 0), "indices sorted and unique within a client"
        assert part.min() >= 0 and part.max() < len(LABELS)
    joined = np.concatenate(parts)
    if info.get("disjoint"):
        assert len(np.unique(joined)) == len(joined), "no sample in two clients"
    if info.get("covers_all"):
        assert np.array_equal(np.sort(joined), np.arange(len(LABELS))), "every sample exactly once"


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_partitioner_is_deterministic_under_the_seed(name):
    first, again = run(name, seed=3), run(name, seed=3)
    assert partition_fingerprint(first) == partition_fingerprint(again)
    if name != "natural":  # natural has no randomness with one client per group
        assert partition_fingerprint(run(name, seed=4)) != partition_fingerprint(first)


def test_unknown_partition_param_is_a_config_error():
    with pytest.raises(ConfigError, match="no parameter"):
        run("iid", bogus=1)


def test_dirichlet_class_counts_and_skew():
    parts = run("dirichlet", alpha=0.1, min_size=10)
    counts = np.stack([np.bincount(LABELS[p], minlength=10) for p in parts])
    assert np.array_equal(counts.sum(0), np.bincount(LABELS))
    assert min(len(p) for p in parts) >= 10
    skewed = np.mean([(c > 0).sum() for c in counts])
    mild = np.mean([(np.bincount(LABELS[p], minlength=10) > 0).sum() for p in run("dirichlet", alpha=100.0)])
    assert skewed < mild
    with pytest.raises(ConfigError, match="alpha"):
        run("dirichlet", alpha=0)


def test_shards_feddrplus_style():
    parts = run("shards", shards_per_client=2)
    for part in parts:
        assert len(part) == 120
        assert len(np.unique(LABELS[part])) <= 2
    # each class is cut into s·N/C = 2 shards of 60; every client's class counts are multiples of 60
    counts = np.stack([np.bincount(LABELS[p], minlength=10) for p in parts])
    assert np.all(counts % 60 == 0) and np.array_equal(counts.sum(0), np.bincount(LABELS))
    with pytest.raises(ConfigError, match="multiple"):
        run("shards", shards_per_client=3, num_clients=7)
    sorted_parts = run("shards", shards_per_client=3, num_clients=7, mode="sorted")
    assert sum(len(p) for p in sorted_parts) == len(LABELS)


def test_orthogonal_clusters():
    parts = run("orthogonal", clusters=5)
    for client, part in enumerate(parts):
        cluster = client % 5
        assert set(np.unique(LABELS[part])) <= {2 * cluster, 2 * cluster + 1}
    fixed = run("orthogonal", clusters=5, samples_per_client=50)
    assert all(len(p) == 50 for p in fixed)
    plato = run("orthogonal", clusters=5, samples_per_client=50, identical_within_cluster=True)
    assert np.array_equal(plato[0], plato[5]) and not np.array_equal(plato[0], plato[1])
    explicit = run("orthogonal", clusters=2, class_groups="0,1,2;3", num_clients=4)
    assert set(np.unique(LABELS[explicit[1]])) == {3}
    with pytest.raises(ConfigError, match="need"):
        run("orthogonal", clusters=5, samples_per_client=1000)
    # 47 EMNIST classes: array_split over all classes (FedTrip spec §8 #10)
    emnist = np.arange(47 * 10) % 47
    groups = run("orthogonal", clusters=5, labels=emnist, groups=None)
    assert len(np.unique(emnist[groups[0]])) == 10 and len(np.unique(emnist[groups[4]])) == 9


def test_natural_maps_one_group_per_client():
    groups = np.random.default_rng(0).integers(0, 5, len(LABELS))
    parts = run("natural", groups=groups, num_clients=5)
    for group_id, part in enumerate(parts):
        assert np.all(groups[part] == group_id)
        assert len(part) == np.sum(groups == group_id)
    with pytest.raises(ConfigError, match="num_clients must be 5"):
        run("natural", groups=groups, num_clients=4)
    with pytest.raises(ConfigError, match="natural groups"):
        run("natural", groups=None, num_clients=5)
    largest = run("natural", groups=groups, num_clients=2, select="largest")
    sizes = np.bincount(groups)
    assert sorted(len(p) for p in largest) == sorted(sizes)[-2:]
    split = run("natural", groups=groups, num_clients=10, clients_per_group=2)
    assert np.all(groups[split[0]] == 0) and np.all(groups[split[1]] == 0) and np.all(groups[split[2]] == 1)
    assert abs(len(split[0]) - len(split[1])) <= 1


def test_samples_per_client_fedtrip_style():
    parts = run("samples_per_client", samples_per_client=100, alpha=0.1)
    assert all(len(p) == 100 for p in parts)
    classes = [len(np.unique(LABELS[p])) for p in parts]
    uniform = [len(np.unique(LABELS[p])) for p in run("samples_per_client", samples_per_client=100, alpha=None)]
    assert np.mean(classes) < np.mean(uniform)
    disjoint = run("samples_per_client", samples_per_client=100, disjoint=True)
    joined = np.concatenate(disjoint)
    assert len(np.unique(joined)) == len(joined)
    # clients draw independently from the whole pool: overlaps are allowed and occur at this size
    overlap = run("samples_per_client", samples_per_client=600, alpha=None)
    assert len(np.unique(np.concatenate(overlap))) < 6000
    with pytest.raises(ConfigError):
        run("samples_per_client", samples_per_client=200, disjoint=True)


def _nested_within_classes(parts):
    """Whether, in every class, of any two clients the one with fewer samples of it holds a subset of the other's."""
    for c in np.unique(LABELS):
        sets = sorted((set(p[LABELS[p] == c].tolist()) for p in parts), key=len)
        if any(not a <= b for a, b in zip(sets, sets[1:])):
            return False
    return True


def test_samples_per_client_shared_keys_ranks_every_client_by_one_order():
    """Plato's Dirichlet sampler seeds every client's generator with the same seed, so torch's weighted draw without
    replacement ranks the samples by the same keys for all clients: in each class the clients' samples are prefixes
    of one order (nested sets), and the clients together hold far fewer distinct samples than independent draws."""
    shared = run("samples_per_client", samples_per_client=300, alpha=0.5, shared_keys=True)
    independent = run("samples_per_client", samples_per_client=300, alpha=0.5)
    assert all(len(p) == 300 and np.all(np.diff(p) > 0) for p in shared)
    assert _nested_within_classes(shared)
    assert not _nested_within_classes(independent)
    assert len(np.unique(np.concatenate(shared))) < 0.8 * len(np.unique(np.concatenate(independent)))
    # the default is the independent draw, unchanged by the new parameter
    assert all(
        np.array_equal(a, b) for a, b in zip(run("samples_per_client", shared_keys=False), run("samples_per_client"))
    )
    # with a disjoint pool the shared ranking still gives distinct clients
    disjoint = np.concatenate(run("samples_per_client", samples_per_client=100, shared_keys=True, disjoint=True))
    assert len(np.unique(disjoint)) == len(disjoint)


def test_samples_per_client_draw_order_lists_the_same_draw_in_the_order_of_the_draws():
    """``draw_order`` changes only the order of each client's samples: the same sets as the default, listed as the
    sequential draws pick them (highest key log w + G first), not by index."""
    for shared in (False, True):
        drawn = run("samples_per_client", samples_per_client=300, alpha=0.5, shared_keys=shared, draw_order=True)
        by_index = run("samples_per_client", samples_per_client=300, alpha=0.5, shared_keys=shared)
        assert all(np.array_equal(np.sort(d), b) for d, b in zip(drawn, by_index))
        assert all(np.any(np.diff(d) < 0) for d in drawn)  # not sorted by index
    assert all(
        np.array_equal(a, b) for a, b in zip(run("samples_per_client", draw_order=False), run("samples_per_client"))
    )
    weights = np.random.default_rng(1).uniform(0.1, 1.0, 500)
    noise = np.random.default_rng(2).gumbel(size=500)
    ranked = _weighted_without_replacement(weights, 50, np.random.default_rng(3), noise, ranked=True)
    keys = np.log(weights) + noise
    assert np.all(np.diff(keys[ranked]) < 0)
    assert set(ranked.tolist()) == set(np.argsort(-keys)[:50].tolist())


def test_torchs_weighted_sampler_yields_its_draws_in_the_order_drawn():
    """The premise of ``draw_order``: torch's WeightedRandomSampler without replacement yields the samples in the
    order sequential weighted draws pick them, so samples of a thousandfold weight come first, wherever they are."""
    weights = torch.tensor([1.0] * 5 + [1000.0] * 5, dtype=torch.float64)
    for seed in range(5):
        sampler = torch.utils.data.WeightedRandomSampler(
            weights, 10, replacement=False, generator=torch.Generator().manual_seed(seed)
        )
        assert sorted(list(sampler)[:5]) == [5, 6, 7, 8, 9]


def test_split_indices_methods():
    rng = np.random.default_rng(0)
    indices = np.arange(100, 200)
    train, val, test = split_indices(indices, (0.4, 0.3, 0.3), rng)
    assert (len(train), len(val), len(test)) == (40, 30, 30)
    assert np.array_equal(np.sort(np.concatenate([train, val, test])), indices)
    head, tail = split_indices(indices, (0.75, 0.25), method="sequential")
    assert np.array_equal(tail, np.arange(175, 200)), "last 25 % is the validation part"
    labels = np.repeat(np.arange(2), 100)
    parts = split_indices(np.arange(200), (0.6, 0.2, 0.2), rng, labels=labels, method="stratified")
    assert [int(np.sum(labels[p] == 0)) for p in parts] == [60, 20, 20]
    with pytest.raises(ConfigError, match="sum to 1"):
        split_indices(indices, (0.5, 0.3), rng)


def test_split_clients_independent_streams():
    parts = run("iid")
    first = split_clients(parts, (0.75, 0.25), np.random.default_rng(1))
    again = split_clients(parts, (0.75, 0.25), np.random.default_rng(1))
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(first, again))
    assert all(len(train) + len(test) == len(p) for (train, test), p in zip(first, parts))


def test_class_matched_test_sets():
    test_labels = np.repeat(np.arange(10), 20)
    parts = run("shards", shards_per_client=2)
    tests = class_matched_test_sets(parts, LABELS, test_labels, np.random.default_rng(0))
    joined = np.concatenate(tests)
    assert np.array_equal(np.sort(joined), np.arange(200)), "client test sets partition the test set"
    for part, test in zip(parts, tests):
        assert set(np.unique(test_labels[test])) == set(np.unique(LABELS[part]))
        assert len(test) == 20  # |D_test| / N
    lda = run("dirichlet", alpha=0.5)
    overlapping = class_matched_test_sets(
        lda, LABELS, test_labels, np.random.default_rng(0), disjoint=False, cap_per_class=5
    )
    for part, test in zip(lda, overlapping):
        assert set(np.unique(test_labels[test])) == set(np.unique(LABELS[part]))
        assert np.all(np.bincount(test_labels[test], minlength=10) <= 5)


def test_natural_test_sets_follow_the_groups():
    groups = np.arange(len(LABELS)) % 3
    test_groups = np.arange(30) % 3
    parts = run("natural", groups=groups, num_clients=3)
    tests = natural_test_sets(parts, groups, test_groups)
    assert [np.unique(test_groups[t]).tolist() for t in tests] == [[0], [1], [2]]
    with pytest.raises(ConfigError, match="groups"):
        natural_test_sets(run("iid", num_clients=3), groups, test_groups)


# ---- dirichlet_pfl: PersonalizedFL's Dirichlet partition with auxiliary workers (FedTR spec §2.2) ------------
PFL_LABELS = np.random.default_rng(11).permutation(np.repeat(np.arange(10), 200))  # 2,000 samples


def run_pfl(num_clients=20, seed=0, labels=PFL_LABELS, **params):
    return make_partition("dirichlet_pfl", labels, None, num_clients, np.random.default_rng(seed), params)


def counts(parts, labels=PFL_LABELS):
    return np.stack([np.bincount(labels[p], minlength=10) for p in parts])


@pytest.mark.parametrize("num_clients", [1, 2, 7, 20])
def test_every_sample_exactly_once(num_clients):
    parts = run_pfl(num_clients)
    assert len(parts) == num_clients
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(PFL_LABELS)))
    assert all(np.all(np.diff(p) > 0) for p in parts)


def test_chunks_and_min_size():
    """Clients 2j and 2j+1 share one chunk of ⌊2/N·n⌋ samples; each holds ≥ half of its fair share."""
    parts = run_pfl(20, alpha=0.1)
    chunk = int(2 / 20 * len(PFL_LABELS))
    for pair in range(10):
        assert len(parts[2 * pair]) + len(parts[2 * pair + 1]) == chunk
    assert min(len(p) for p in parts) >= int(0.5 * chunk / 2)
    # odd client count: the last chunk (the remainder) belongs to the last client alone
    odd = run_pfl(7, alpha=0.1)
    assert len(odd[-1]) == len(PFL_LABELS) - 3 * int(2 / 7 * len(PFL_LABELS))


def test_deterministic_under_the_seed():
    assert partition_fingerprint(run_pfl(seed=5)) == partition_fingerprint(run_pfl(seed=5))
    assert partition_fingerprint(run_pfl(seed=6)) != partition_fingerprint(run_pfl(seed=5))


def test_label_skew_grows_as_alpha_shrinks():
    def skew(alpha):  # mean total-variation distance of a client's class mix from the global one, over seeds
        values = []
        for seed in range(3):
            c = counts(run_pfl(20, seed=seed, alpha=alpha)).astype(float)
            mix = c / c.sum(1, keepdims=True)
            values.append(0.5 * np.abs(mix - 0.1).sum(1).mean())
        return np.mean(values)

    strong, medium, mild = skew(0.05), skew(0.5), skew(100.0)
    assert strong > medium > mild
    assert mild < 0.15 and strong > 0.4


def _drawn_sequence(drawn, labels=PFL_LABELS):
    """The (drawn client, class) of every sample in the order PersonalizedFL concatenates the drawn clients: client
    by client, each class by class."""
    return [
        (j, c)
        for j, part in enumerate(drawn)
        for c, n in enumerate(np.bincount(labels[part], minlength=10))
        for _ in range(n)
    ]


@pytest.mark.parametrize(("num_clients", "seed"), [(20, 0), (20, 3), (7, 1)])
def test_equal_slices_cut_the_drawn_clients_concatenated_into_equal_pieces(num_clients, seed):
    """PersonalizedFL's DataPartitioner: the drawn clients' lists joined, cut into N slices of int(n/N), the rest
    left out; the slices consume the partition stream exactly as the drawn clients do."""
    drawn = run_pfl(num_clients, seed=seed, alpha=0.1)
    sliced = run_pfl(num_clients, seed=seed, alpha=0.1, equal_slices=True)
    size = int(1.0 / num_clients * len(PFL_LABELS))
    assert [len(part) for part in sliced] == [size] * num_clients
    owner = np.empty(len(PFL_LABELS), dtype=np.int64)
    for j, part in enumerate(drawn):
        owner[part] = j
    sequence = _drawn_sequence(drawn)
    for k, part in enumerate(sliced):
        assert np.all(np.diff(part) > 0)
        got = sorted(zip(owner[part].tolist(), PFL_LABELS[part].tolist()))
        assert got == sorted(sequence[size * k : size * (k + 1)])
    joined = np.concatenate(sliced)
    assert len(np.unique(joined)) == len(joined) == num_clients * size
    left_out = np.setdiff1d(np.arange(len(PFL_LABELS)), joined)
    assert sorted(zip(owner[left_out].tolist(), PFL_LABELS[left_out].tolist())) == sorted(
        sequence[num_clients * size :]
    )


def test_equal_slices_off_is_the_drawn_partition():
    assert partition_fingerprint(run_pfl(seed=2, equal_slices=False)) == partition_fingerprint(run_pfl(seed=2))
    assert partition_fingerprint(run_pfl(seed=2, equal_slices=True)) != partition_fingerprint(run_pfl(seed=2))


def test_bad_parameters():
    with pytest.raises(ConfigError, match="alpha"):
        run_pfl(alpha=0)
    with pytest.raises(ConfigError, match="auxiliary_workers"):
        run_pfl(auxiliary_workers=0)
    with pytest.raises(ConfigError, match="min_fraction"):
        run_pfl(min_fraction=1.5, max_tries=2)


# ---- class_ordered_split: PersonalizedFL's per-client 40/30/30 "evenly" split --------------------------------
def test_class_ordered_split_cuts_every_class_in_index_order():
    labels = np.array([0] * 10 + [1] * 5 + [2] * 1)  # classes of 10, 5 and 1 samples, in index order
    client = np.random.default_rng(0).permutation(16)  # the order a client holds them in does not matter
    train, test, val = class_ordered_split(client, labels, 0.3, 0.3)
    # class 0: int(0.4·10) = 4, int(0.3·10) = 3, the rest 3; class 1: 2, 1, 2 (1 − 0.3 − 0.3 is 0.4, not 0.39…);
    # class 2: 0, 0, 1
    assert train.tolist() == [0, 1, 2, 3, 10, 11]
    assert test.tolist() == [4, 5, 6, 12]
    assert val.tolist() == [7, 8, 9, 13, 14, 15]


def test_class_ordered_split_without_validation_gives_test_the_rest():
    labels = np.array([0] * 7 + [1] * 3)
    train, test, val = class_ordered_split(np.arange(10), labels, 0.3, 0.0)
    assert train.tolist() == [0, 1, 2, 3, 7, 8] and test.tolist() == [4, 5, 6, 9] and val.tolist() == []
    train, test, val = class_ordered_split(np.arange(3, 10), labels, 0.0, 0.5)  # a client holding a part only
    assert train.tolist() == [3, 4, 7] and test.tolist() == [] and val.tolist() == [5, 6, 8, 9]
