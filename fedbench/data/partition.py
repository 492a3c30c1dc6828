"""Partitioners: pure, seeded functions mapping the training pool to clients.

Signature: ``fn(labels, groups, num_clients, rng, **params) -> list[np.ndarray]`` (one sorted index
array per client). ``labels`` is the int label array of the training pool, ``groups`` the natural group
ids or None, ``rng`` a ``numpy.random.Generator`` from the run's partition stream. Partitioners registered
with ``label_free=True`` (iid, natural) use no label values, so they also split segmentation data (masks as labels).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np

from fedbench.errors import ConfigError
from fedbench.plugins import PluginRegistry, check_params
from fedbench.spec import HashNeutral

PARTITIONERS: PluginRegistry[Callable[..., list[np.ndarray]]] = PluginRegistry("partitioner")
register_partitioner = PARTITIONERS.register


def partition_fingerprint(parts: list[np.ndarray]) -> str:
    """Hash of the index arrays: two runs with the same fingerprint trained on the same client data."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(np.asarray(part, dtype=np.int64).tobytes())
        digest.update(b"|")
    return digest.hexdigest()[:16]


@register_partitioner("iid", covers_all=True, disjoint=True, label_free=True)
def iid(labels: np.ndarray, groups: np.ndarray | None, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle and split into near-equal parts."""
    order = rng.permutation(len(labels))
    return [np.sort(part) for part in np.array_split(order, num_clients)]


def _dirichlet_split(
    by_class: list[np.ndarray],
    num_clients: int,
    alpha: float,
    balance: bool,
    min_size: int,
    max_tries: int,
    rng: np.random.Generator,
    shuffle: bool,
) -> list[np.ndarray] | None:
    """The Dirichlet label-skew draw shared by ``dirichlet`` and ``dirichlet_pfl``: for every class's members (shuffled
    first with ``shuffle``), shares p ~ Dir_N(alpha) cut them among the N clients; with ``balance`` a client already
    holding ≥ pool/N samples gets share 0. The whole draw is repeated until every client holds ``min_size`` samples;
    each client's indices in the order drawn (class by class, in ``by_class``'s order), or None when ``max_tries``
    draws all left a client short."""
    pool = sum(len(members) for members in by_class)
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        sizes = np.zeros(num_clients, dtype=np.int64)
        for members in by_class:
            if shuffle:
                members = rng.permutation(members)
            shares = rng.dirichlet(np.full(num_clients, alpha))
            if balance:
                capped = shares * (sizes < pool / num_clients)
                # all clients full can only happen once the pool is exhausted; keep the raw shares then
                shares = capped / capped.sum() if capped.sum() > 0 else shares
            cuts = (np.cumsum(shares) * len(members)).astype(np.int64)[:-1]
            for client, chunk in enumerate(np.split(members, cuts)):
                parts[client].append(chunk)
                sizes[client] += len(chunk)
        if sizes.min() >= min_size:
            return [np.concatenate(p) for p in parts]
    return None


@register_partitioner("dirichlet", covers_all=True, disjoint=True)
def dirichlet(
    labels: np.ndarray,
    groups: np.ndarray | None,
    num_clients: int,
    rng: np.random.Generator,
    alpha: float = 0.5,
    min_size: int = 10,
    balance: bool = False,
    max_tries: int = 1000,
) -> list[np.ndarray]:
    """Label skew (Yurochkin et al. 2019, as in NIID-Bench ``noniid-labeldir``): for every class draw
    p ~ Dir_N(alpha) and give client i a share p_i of that class's samples. The whole draw is repeated
    until every client holds at least ``min_size`` samples. ``balance`` enables NIID-Bench's trick of
    zeroing the share of clients that already hold more than N_total/num_clients samples.
    """
    if alpha <= 0:
        raise ConfigError(f"partition_params.alpha must be > 0, got {alpha}")
    if min_size * num_clients > len(labels):
        raise ConfigError(
            f"partition_params.min_size={min_size} × {num_clients} clients exceeds the {len(labels)} training samples; "
            "lower min_size or the number of clients"
        )
    by_class = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    parts = _dirichlet_split(by_class, num_clients, alpha, balance, min_size, max_tries, rng, shuffle=True)
    if parts is not None:
        return [np.sort(part) for part in parts]
    raise ConfigError(
        f"dirichlet partition could not give every one of {num_clients} clients {min_size} samples "
        f"in {max_tries} draws at alpha={alpha}; lower partition_params.min_size or raise alpha"
    )


@register_partitioner("shards", covers_all=True, disjoint=True)
def shards(
    labels: np.ndarray,
    groups: np.ndarray | None,
    num_clients: int,
    rng: np.random.Generator,
    shards_per_client: int = 2,
    mode: str = "class",
) -> list[np.ndarray]:
    """Pathological label skew: each client holds ``shards_per_client`` (s) single-class shards.

    mode='class' (FedDr+ ``datasetter.py``): every class is cut into s·N/C shards; the multiset
    {0..C-1} × (s·N/C) is shuffled and reshaped to N × s, row i listing the classes of client i's shards
    (repeats allowed, so a client holds *at most* s classes). Needs (s·N) % C == 0.
    mode='sorted' (McMahan et al. 2017): sort by label, cut into N·s equal shards, deal s at random.
    """
    if shards_per_client < 1:
        raise ConfigError(f"partition_params.shards_per_client must be ≥ 1, got {shards_per_client}")
    if mode == "sorted":
        order = np.argsort(labels, kind="stable")
        pieces = np.array_split(order, num_clients * shards_per_client)
        dealt = rng.permutation(len(pieces)).reshape(num_clients, shards_per_client)
        return [np.sort(np.concatenate([pieces[j] for j in row])) for row in dealt]
    if mode != "class":
        raise ConfigError(f"partition_params.mode={mode!r} for shards; choose 'class' or 'sorted'")
    classes = np.unique(labels)
    total = shards_per_client * num_clients
    if total % len(classes):
        raise ConfigError(
            f"shards: shards_per_client={shards_per_client} × {num_clients} clients = {total} shards is not a multiple "
            f"of the {len(classes)} classes; change them or use partition_params.mode='sorted'"
        )
    per_class = total // len(classes)
    class_shards: dict[Any, list[np.ndarray]] = {}
    for c in classes:
        members = rng.permutation(np.flatnonzero(labels == c))
        if len(members) < per_class:
            raise ConfigError(f"shards: class {c} has {len(members)} samples, fewer than its {per_class} shards")
        class_shards[c] = list(np.array_split(members, per_class))
    assignment = rng.permutation(np.repeat(classes, per_class)).reshape(num_clients, shards_per_client)
    return [np.sort(np.concatenate([class_shards[c].pop() for c in row])) for row in assignment]


def _class_groups(classes: np.ndarray, clusters: int, class_groups: Any) -> list[np.ndarray]:
    if class_groups is None:
        return [np.asarray(g) for g in np.array_split(classes, clusters)]
    if isinstance(class_groups, str):  # Plato's institution_class_ids "0,1;2,3;4,5;6,7;8,9"
        class_groups = [[int(c) for c in part.split(",") if c.strip()] for part in class_groups.split(";")]
    groups_list = [np.asarray(g, dtype=np.int64) for g in class_groups]
    if len(groups_list) != clusters:
        raise ConfigError(f"orthogonal: {len(groups_list)} class groups given for clusters={clusters}")
    flat = np.concatenate(groups_list)
    if len(set(flat.tolist())) != len(flat):
        raise ConfigError("orthogonal: partition_params.class_groups must be disjoint")
    return groups_list


@register_partitioner("orthogonal", covers_all=False, disjoint=True)
def orthogonal(
    labels: np.ndarray,
    groups: np.ndarray | None,
    num_clients: int,
    rng: np.random.Generator,
    clusters: int = 5,
    class_groups: Any = None,
    samples_per_client: int | None = None,
    identical_within_cluster: bool = False,
) -> list[np.ndarray]:
    """FedTrip's Orthogonal-c (Plato ``samplers/orthogonal.py``): client k (0-indexed) belongs to cluster
    k mod c; each cluster owns a disjoint set of classes (``class_groups``, default ``array_split`` of all
    classes — FedTrip spec §8 #10) and its clients sample IID from that cluster's pool.

    ``samples_per_client`` draws that many per client (FedTrip's partition_size); None splits the
    cluster's whole pool evenly (then every sample is used). Clients of a cluster get disjoint samples
    [proposal]; ``identical_within_cluster=True`` mimics Plato, where they receive identical sets.
    """
    if not 1 <= clusters <= num_clients:
        raise ConfigError(f"orthogonal: clusters={clusters} must be between 1 and num_clients={num_clients}")
    classes = np.unique(labels)
    class_sets = _class_groups(classes, clusters, class_groups)
    parts: list[np.ndarray] = [np.empty(0, np.int64)] * num_clients
    for cluster, owned in enumerate(class_sets):
        members = np.arange(cluster, num_clients, clusters)
        pool = rng.permutation(np.flatnonzero(np.isin(labels, owned)))
        if identical_within_cluster:
            take = pool[:samples_per_client] if samples_per_client else pool
            if samples_per_client and len(take) < samples_per_client:
                raise ConfigError(
                    f"orthogonal: cluster {cluster} has {len(pool)} samples < samples_per_client={samples_per_client}"
                )
            for client in members:
                parts[client] = np.sort(take)
            continue
        if samples_per_client:
            need = samples_per_client * len(members)
            if need > len(pool):
                raise ConfigError(
                    f"orthogonal: cluster {cluster} (classes {owned.tolist()}) has {len(pool)} samples, its {len(members)} "
                    f"clients need {need}; lower samples_per_client or set identical_within_cluster"
                )
            chunks = np.split(pool[:need], len(members))
        else:
            chunks = np.array_split(pool, len(members))
        for client, chunk in zip(members, chunks):
            parts[client] = np.sort(chunk)
    return parts


@register_partitioner("natural", covers_all=True, disjoint=True, needs_groups=True, label_free=True)
def natural(
    labels: np.ndarray,
    groups: np.ndarray | None,
    num_clients: int,
    rng: np.random.Generator,
    select: str = "all",
    clients_per_group: int | list[int] = 1,
) -> list[np.ndarray]:
    """One natural group (subject, hospital, domain, writer, site) per client, in group-id order.

    ``select='largest'`` keeps only the ``num_clients`` largest groups (PFLlib's top-N FEMNIST writers).
    ``clients_per_group=k`` splits every group IID into k clients (LG-Mix Fig. 2c [proposal]); a list gives each
    group (in group-id order) its own count, e.g. [2, 2, 1, 1]: six clients from four sites (LG-Mix Retinal)."""
    if groups is None:
        raise ConfigError("partition 'natural' needs a dataset with natural groups (subject/hospital/domain/writer)")
    ids, counts = np.unique(groups, return_counts=True)
    per_group = [clients_per_group] if isinstance(clients_per_group, int) else list(clients_per_group)
    if not per_group or min(per_group) < 1:
        raise ConfigError(f"natural: clients_per_group must be ≥ 1, got {clients_per_group}")
    if isinstance(clients_per_group, int):
        wanted_groups, remainder = divmod(num_clients, clients_per_group)
        if remainder:
            raise ConfigError(
                f"natural: num_clients={num_clients} is not a multiple of clients_per_group={clients_per_group}"
            )
    else:
        wanted_groups = len(per_group)
        if sum(per_group) != num_clients:
            raise ConfigError(
                f"natural: clients_per_group={per_group} makes {sum(per_group)} clients; num_clients={num_clients}"
            )
    if select == "largest":
        if wanted_groups > len(ids):
            raise ConfigError(f"natural: {wanted_groups} groups requested, the data has {len(ids)}")
        ids = np.sort(ids[np.argsort(-counts, kind="stable")[:wanted_groups]])
    elif select != "all":
        raise ConfigError(f"natural: select={select!r}; choose 'all' or 'largest'")
    elif wanted_groups != len(ids):
        if not isinstance(clients_per_group, int):
            raise ConfigError(
                f"natural: the data has {len(ids)} groups, clients_per_group={per_group} gives counts for "
                f"{len(per_group)}; give one count per group"
            )
        raise ConfigError(
            f"natural: the data has {len(ids)} groups, so num_clients must be {len(ids) * clients_per_group} "
            f"(got {num_clients}); or use partition_params.select='largest'"
        )
    order = np.argsort(groups, kind="stable")
    starts = np.searchsorted(groups[order], ids)
    ends = np.searchsorted(groups[order], ids, side="right")
    parts = []
    for index, (start, end) in enumerate(zip(starts, ends)):
        members = order[start:end]
        k = clients_per_group if isinstance(clients_per_group, int) else per_group[index]
        if k == 1:
            parts.append(np.sort(members))
        else:
            parts.extend(np.sort(p) for p in np.array_split(rng.permutation(members), k))
    return parts


def _weighted_without_replacement(
    weights: np.ndarray, count: int, rng: np.random.Generator, noise: np.ndarray | None = None, ranked: bool = False
) -> np.ndarray:
    """``count`` distinct indices drawn sequentially with probability ∝ weights (the law of torch's
    WeightedRandomSampler(replacement=False)), via Gumbel top-k keys: log wᵢ + Gᵢ with Gᵢ ~ Gumbel drawn from ``rng``,
    or the given ``noise`` (one Gumbel per sample, shared by callers that must rank the samples alike). ``ranked``:
    in the order of the draws, highest key first (the order torch's sampler yields them: its multinomial without
    replacement is a sorted top-k of the keys); otherwise in no particular order."""
    with np.errstate(divide="ignore"):
        keys = np.log(weights) + (rng.gumbel(size=len(weights)) if noise is None else noise)
    positive = int(np.count_nonzero(weights > 0))
    if positive < count:
        raise ConfigError(f"only {positive} samples have non-zero weight, {count} requested")
    chosen = np.argpartition(-keys, count - 1)[:count] if count < len(keys) else np.arange(len(keys))
    return chosen[np.argsort(-keys[chosen], kind="stable")] if ranked else chosen


@register_partitioner("samples_per_client", covers_all=False, disjoint=False)
def samples_per_client_partition(
    labels: np.ndarray,
    groups: np.ndarray | None,
    num_clients: int,
    rng: np.random.Generator,
    samples_per_client: int = 600,
    alpha: float | None = 0.5,
    disjoint: bool = False,
    # added later: specs without it keep their hash
    shared_keys: Annotated[bool, HashNeutral(False)] = False,
    draw_order: Annotated[bool, HashNeutral(False)] = False,
) -> list[np.ndarray]:
    """FedTrip's Dir-α (Plato ``samplers/dirichlet.py``): each client draws its own class proportions
    q_k ~ Dir(α·1_C) and then ``samples_per_client`` distinct indices from the *whole* training set with
    per-sample weight q_k[y_i]. Clients sample independently, so their sets may overlap (FedTrip §2.3);
    ``disjoint=True`` removes each client's draw from the pool first. ``alpha=None`` samples uniformly.
    Per-client streams are derived from ``rng`` so client k's draw does not depend on the others'.

    ``shared_keys=True`` is the authors' code as it runs [code]: Plato's ``Sampler.get()`` seeds every client's
    torch generator with the same ``data.random_seed`` (``plato/samplers/dirichlet.py``; ``samplers/base.py``:
    "Keeping random seed the same across the clients"), and torch draws without replacement as the top-n of
    wᵢ/Eᵢ with one Exp(1) key Eᵢ per sample from that generator. So every client ranks the samples with the *same*
    keys: within a class, a client's samples are the first ones of one common order, a client with fewer samples
    of the class holds a subset of another's, and the clients together hold about a third of the distinct
    samples independent draws give (MNIST, 10 × 600, Dir-0.5). Here: one Gumbel key per sample shared by all
    clients (log wᵢ − log Eᵢ is that law), each client's proportions still its own.

    ``draw_order=True`` lists each client's samples in the order they were drawn, highest key first, as Plato's
    sampler yields them to its trainer (torch's multinomial without replacement returns a sorted top-k), instead of
    by index: with ``batch_order = "fixed"`` the client then trains on them in that order, the same every round, as
    the authors' code does. When a client draws a small part of the pool (FedTrip: 600 of 60,000), the selected
    samples' keys are spread alike whatever their class, so that order is a random one, unrelated to class, that
    the client keeps from round to round.
    """
    if samples_per_client < 1 or samples_per_client > len(labels):
        raise ConfigError(
            f"samples_per_client={samples_per_client} must be between 1 and the {len(labels)} training samples"
        )
    if alpha is not None and alpha <= 0:
        raise ConfigError(f"partition_params.alpha must be > 0, got {alpha}")
    if disjoint and samples_per_client * num_clients > len(labels):
        raise ConfigError(
            f"disjoint samples_per_client: {num_clients}×{samples_per_client} exceeds {len(labels)} samples"
        )
    classes, label_index = np.unique(labels, return_inverse=True)
    client_rngs = [np.random.default_rng(s) for s in rng.integers(0, 2**63 - 1, size=num_clients)]
    # drawn after the clients' streams, and only when asked: the default's draws stay what they were
    noise = np.random.default_rng(rng.integers(0, 2**63 - 1)).gumbel(size=len(labels)) if shared_keys else None
    available = np.ones(len(labels), dtype=bool)
    parts = []
    for client_rng in client_rngs:
        proportions = np.ones(len(classes)) if alpha is None else client_rng.dirichlet(np.full(len(classes), alpha))
        weights = proportions[label_index] * available
        try:
            chosen = _weighted_without_replacement(weights, samples_per_client, client_rng, noise, draw_order)
        except ConfigError:
            # A near-zero Dirichlet share can underflow to 0 for every sample of most classes; fall back to
            # the classes' order of preference (what sequential weighted sampling does in that limit).
            weights = (proportions[label_index] + 1e-300) * available
            chosen = _weighted_without_replacement(weights, samples_per_client, client_rng, noise, draw_order)
        if disjoint:
            available[chosen] = False
        parts.append(chosen if draw_order else np.sort(chosen))
    return parts


# ---- within-client splits --------------------------------------------------------------------------


def _cut(count: int, fractions: tuple[float, ...]) -> np.ndarray:
    return np.round(np.cumsum(fractions)[:-1] * count).astype(np.int64)


def split_indices(
    indices: np.ndarray,
    fractions: tuple[float, ...] | list[float],
    rng: np.random.Generator | None = None,
    labels: np.ndarray | None = None,
    method: str = "random",
) -> list[np.ndarray]:
    """Split one client's indices into parts of the given fractions (e.g. train/val/test).

    method='random': shuffle then cut (PFLlib's 75/25, LG-Mix 0.6/0.2/0.2);
    'stratified': the same cut inside every class (FedAP's 40/30/30 "evenly" split);
    'sequential': keep the given order and cut (HeteroPFL's "last 25 % of train is validation").
    Fractions must sum to 1; parts come back sorted (sequential keeps the order).
    """
    fractions = tuple(float(f) for f in fractions)
    if not fractions or min(fractions) < 0 or abs(sum(fractions) - 1.0) > 1e-6:
        raise ConfigError(f"split fractions {fractions} must be non-negative and sum to 1")
    indices = np.asarray(indices, dtype=np.int64)
    if method == "sequential":
        return list(np.split(indices, _cut(len(indices), fractions)))
    if rng is None:
        raise ConfigError(f"split method {method!r} needs an rng")
    if method == "random":
        return [np.sort(p) for p in np.split(rng.permutation(indices), _cut(len(indices), fractions))]
    if method == "stratified":
        if labels is None:
            raise ConfigError("stratified split needs labels")
        pieces: list[list[np.ndarray]] = [[] for _ in fractions]
        client_labels = labels[indices]
        for c in np.unique(client_labels):
            members = rng.permutation(indices[client_labels == c])
            for k, piece in enumerate(np.split(members, _cut(len(members), fractions))):
                pieces[k].append(piece)
        return [np.sort(np.concatenate(p)) if p else np.empty(0, np.int64) for p in pieces]
    raise ConfigError(f"split method {method!r}; choose 'random', 'stratified' or 'sequential'")


def class_ordered_split(
    indices: np.ndarray, labels: np.ndarray, test_fraction: float, val_fraction: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One client's (train, test, validation) indices as PersonalizedFL cuts them (``datasplit.py``
    ``define_val_dataset``, partition_type "evenly"): every class's samples of the client in the data set's order
    (ascending index), the first int(f_train · l) for training, the next int(f_test · l) for test, the rest for
    validation (for test when there is no validation split), where l is the class's count and f_train =
    1 − f_test − f_val. On a pool stacked from official splits (MedMNIST ``pool = "all"``: train, val, test) the
    training part comes first from the official training split and the validation part last from its test split.
    No randomness: the order is the data set's."""
    indices = np.sort(np.asarray(indices, dtype=np.int64))
    train_fraction = round(1.0 - test_fraction - val_fraction, 12)  # 1 − 0.3 − 0.3 is 0.39999999999999997
    client_labels = labels[indices]
    pieces: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for c in np.unique(client_labels):
        members = indices[client_labels == c]
        n_train = int(train_fraction * len(members))
        n_test = int(test_fraction * len(members)) if val_fraction > 0 else len(members) - n_train
        pieces[0].append(members[:n_train])
        pieces[1].append(members[n_train : n_train + n_test])
        pieces[2].append(members[n_train + n_test :])
    train, test, val = (np.sort(np.concatenate(p)) if p else indices[:0] for p in pieces)
    return train, test, val


def split_clients(
    parts: list[np.ndarray],
    fractions: tuple[float, ...] | list[float],
    rng: np.random.Generator,
    labels: np.ndarray | None = None,
    method: str = "random",
) -> list[list[np.ndarray]]:
    """``split_indices`` for every client with an independent per-client stream."""
    seeds = rng.integers(0, 2**63 - 1, size=len(parts))
    return [split_indices(p, fractions, np.random.default_rng(s), labels, method) for p, s in zip(parts, seeds)]


def class_matched_test_sets(
    parts: list[np.ndarray],
    train_labels: np.ndarray,
    test_labels: np.ndarray,
    rng: np.random.Generator,
    disjoint: bool = True,
    cap_per_class: int | None = None,
) -> list[np.ndarray]:
    """Per-client test sets whose class mix follows each client's training data.

    disjoint=True (FedDr+ sharding, ``rand_set_all``): each class's test samples are shared among the
    clients in proportion to their training counts of that class, so the client test sets partition
    the test samples of the classes in use. disjoint=False (FedDr+ ``lda_test``): every client takes its
    first n_{i,k} items of a fresh permutation of class k's test samples (capped), so sets overlap.
    """
    num_classes = int(max(train_labels.max(initial=0), test_labels.max(initial=0))) + 1
    counts = np.stack([np.bincount(train_labels[p], minlength=num_classes) for p in parts])  # clients × classes
    by_class = [np.flatnonzero(test_labels == c) for c in range(num_classes)]
    result: list[list[np.ndarray]] = [[] for _ in parts]
    for c in range(num_classes):
        members = by_class[c]
        if disjoint:
            if counts[:, c].sum() == 0:
                continue
            shares = counts[:, c] / counts[:, c].sum()
            cuts = np.round(np.cumsum(shares)[:-1] * len(members)).astype(np.int64)
            for client, chunk in enumerate(np.split(rng.permutation(members), cuts)):
                result[client].append(chunk)
        else:
            for client in np.flatnonzero(counts[:, c]).tolist():
                take = min(int(counts[client, c]), len(members), cap_per_class or len(members))
                result[client].append(rng.permutation(members)[:take])
    return [np.sort(np.concatenate(r)) if r else np.empty(0, np.int64) for r in result]


def natural_test_sets(parts: list[np.ndarray], train_groups: np.ndarray, test_groups: np.ndarray) -> list[np.ndarray]:
    """Each client's test samples under the ``natural`` partition: the test samples of its group (its domain,
    hospital, subject or writer). Sub-clients of one group (``clients_per_group > 1``) share that group's test set."""
    result = []
    for part in parts:
        owners = np.unique(train_groups[part])
        if len(owners) != 1:
            raise ConfigError(
                f"natural_test_sets: a client holds samples of {len(owners)} groups; use it with the natural partition"
            )
        result.append(np.flatnonzero(test_groups == owners[0]))
    return result


def make_partition(
    name: str,
    labels: np.ndarray,
    groups: np.ndarray | None,
    num_clients: int,
    seed_rng: np.random.Generator,
    params: dict[str, Any],
) -> list[np.ndarray]:
    fn = PARTITIONERS.get(name)
    check_params(name, fn, params, {"labels", "groups", "num_clients", "rng"}, "partitioner")
    parts = fn(labels=labels, groups=groups, num_clients=num_clients, rng=seed_rng, **params)
    if len(parts) != num_clients:
        raise ConfigError(f"partitioner {name!r} produced {len(parts)} clients, the run asks for {num_clients}")
    return [np.asarray(p, dtype=np.int64) for p in parts]


@register_partitioner("dirichlet_pfl", covers_all=True, disjoint=True)
def dirichlet_pfl(
    labels: np.ndarray,
    groups: np.ndarray | None,
    num_clients: int,
    rng: np.random.Generator,
    alpha: float = 0.1,
    auxiliary_workers: int = 2,
    min_fraction: float = 0.5,
    balance: bool = True,
    max_tries: int = 1000,
    equal_slices: Annotated[bool, HashNeutral(False)] = False,
) -> list[np.ndarray]:
    """PersonalizedFL's Dirichlet label skew (FedTR spec §2.2 "PersonalizedFL variant"; microsoft/PersonalizedFL
    ``datautil/datasplit.py``, itself from epfml/quasi-global-momentum): the "auxiliary workers" trick.

    The shuffled pool is cut into ceil(N/a) chunks of ⌊a·n/N⌋ samples (the last chunk takes the remainder), where
    a = ``auxiliary_workers`` (2 in PersonalizedFL) and N = num_clients. Each chunk is shared by a clients only
    (the last one by the N − a·⌊(N−1)/a⌋ left over): for every class, shares p ~ Dir_a(alpha) split that chunk's
    samples of the class; with ``balance`` a client already holding ≥ chunk/a samples gets share 0. A chunk's draw is
    repeated until each of its clients holds at least ``min_fraction`` · chunk/a samples (PersonalizedFL: 0.5).
    Label skew therefore acts within small client groups; every sample is used exactly once. PersonalizedFL seeds a
    ``RandomState(1)``; here the run's partition stream drives the draws, so indices differ from its cached splits.

    ``equal_slices``: what PersonalizedFL's ``DataPartitioner`` then does with those clients. It concatenates their
    index lists (client by client, each in the order drawn: class by class) and cuts the result into N consecutive
    slices of int(n / N) samples, the last n − N·int(n / N) left out; those slices are its clients. Every client then
    holds the same number of samples, and a slice that crosses a drawn client's end takes the last classes of one
    drawn client and the first of the next. Off by default, so that the partition a spec without it names stays
    the one drawn.
    """
    if alpha <= 0:
        raise ConfigError(f"partition_params.alpha must be > 0, got {alpha}")
    if auxiliary_workers < 1:
        raise ConfigError(f"partition_params.auxiliary_workers must be ≥ 1, got {auxiliary_workers}")
    if not 0 <= min_fraction <= 1:
        raise ConfigError(f"partition_params.min_fraction must be in [0, 1], got {min_fraction}")
    total = len(labels)
    per_chunk = min(auxiliary_workers, num_clients)
    num_chunks = -(-num_clients // per_chunk)
    order = rng.permutation(total)
    chunk_size = int(per_chunk / num_clients * total)
    cuts = [chunk_size * k for k in range(1, num_chunks)]
    classes = np.unique(labels)
    parts: list[np.ndarray] = []
    remaining = num_clients
    for chunk_index, chunk in enumerate(np.split(order, cuts)):
        workers = min(per_chunk, remaining)
        remaining -= workers
        chunk_labels = labels[chunk]
        members_by_class = [chunk[chunk_labels == c] for c in classes]
        need = int(min_fraction * len(chunk) / workers)
        pieces = _dirichlet_split(members_by_class, workers, alpha, balance, need, max_tries, rng, shuffle=False)
        if pieces is None:
            raise ConfigError(
                f"dirichlet_pfl: chunk {chunk_index} ({len(chunk)} samples) could not give each of its {workers} clients "
                f"{need} samples in {max_tries} draws at alpha={alpha}; lower partition_params.min_fraction or raise alpha"
            )
        parts.extend(pieces)
    if equal_slices:  # datasplit.py DataPartitioner.partition_indices: partition_sizes = [1 / N] * N
        joined, size = np.concatenate(parts), int(1.0 / num_clients * total)
        parts = [joined[size * client : size * (client + 1)] for client in range(num_clients)]
    return [np.sort(part) for part in parts]
