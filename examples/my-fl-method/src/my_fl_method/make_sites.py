"""Write the image folder of the data set ``sitedigits`` from scikit-learn's 8×8 digits:

    python -m my_fl_method.make_sites "$FEDBENCH_DATA/sitedigits" [--per-site 20]

Three sites, each scanning digits its own way — ``a_plain`` (as scikit-learn has them), ``b_faint`` (half the ink)
and ``c_shifted`` (one pixel to the right) — a feature shift between clients, as between FedBN's digit domains. Each
site gets ``per_site`` images of each class, as ``<site>/<class>/<index>.png`` (8×8, gray): the layout fedbench's
``imagefolder`` loader reads too. Nothing of it is committed: it is written where the data live.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

SITES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "a_plain": lambda image: image,
    "b_faint": lambda image: image // 2,
    "c_shifted": lambda image: np.roll(image, 1, axis=1),
}


def write_sites(folder: Path, per_site: int = 20) -> int:
    """Write ``per_site`` images of each class to each site under ``folder``; returns how many were written."""
    from PIL import Image
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.round(bunch.images * (255.0 / 16.0)).astype(np.uint8)  # 0..16 → 0..255
    written = 0
    for label in range(10):
        chosen = np.flatnonzero(bunch.target == label)[: per_site * len(SITES)]
        for position, index in enumerate(chosen):  # the class's images dealt to the sites in turn
            site = list(SITES)[position % len(SITES)]
            target = folder / site / str(label) / f"{index:04d}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(SITES[site](images[index])).save(target)
            written += 1
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "folder", type=Path, help="where to write the sites (the data set's folder: <data root>/sitedigits)"
    )
    parser.add_argument("--per-site", type=int, default=20, help="images of each class per site (default 20)")
    args = parser.parse_args(argv)
    count = write_sites(args.folder, args.per_site)
    print(f"{count} images in {args.folder}")


if __name__ == "__main__":
    main()
