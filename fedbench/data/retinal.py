"""Retinal fundus optic disc / cup segmentation, one site per client (LG-Mix Table 3).

Layout of the DoFE/FedDG "Fundus" package: ``retinal/Fundus/Domain{1..}/{train,test}/ROIs/{image,mask}/*.png``
(the mask has the image's file name). Mask encoding: gray 0 = cup, 128 = disc rim, 255 = background. The DoFE
authors' loaders threshold it rather than test equality, because resampled or anti-aliased masks hold intermediate
values at the borders: > 200 background, 51–200 rim, ≤ 50 cup, i.e. disc = mask ≤ 200 and
cup = mask ≤ 50 [code: emma-sjwang/BEAL dataloaders/custom_transforms.py ``Normalize_tf`` + ``to_multilabel``; the
same rule in scott-yjyang/HCDG dataloaders/custom_transforms.py, which reads the ``Domain<k>/{train,test}/ROIs``
layout; jcwang123/FedLC utils/prepare_dataset.py maps it to 0/1/2 = background/rim/cup as ``2 - gray // 127``].
Channel order disc, cup follows FedDG's npy files [code: liuquande/FedDG-ELCFS dataloaders/fundus_dataloader.py].
LG-Mix uses six sources whose identity and order are unstated (lgmix.md §8 #13–14): ``sites`` lists the Domain
folders to use, in group (client) order. ``pool_splits = true`` pools each site's train and test folders into one
training pool and leaves the test set empty, for LG-Mix's own 0.6 / 0.2 / 0.2 split of every client
(``client_test = "split"``); the package's split holds out about half of Drishti-GS and 20-40 % of the others.

Returns images uint8 (N, 3, S, S) and, as labels, masks uint8 (N, 2, S, S) with channel 0 = disc and
channel 1 = cup (``meta.task == 'segmentation'``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import numpy as np

from fedbench.data._registry import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.data.common import NONE3, pool_train_test, read_train_test
from fedbench.data.files import FileSpec, Source, missing_error, verify_files
from fedbench.data.images import read_images
from fedbench.errors import DataError
from fedbench.spec import HashNeutral

RETINAL_SOURCE = Source(
    layout="retinal/Fundus/Domain<k>/{train,test}/ROIs/{image,mask}/*.png (DoFE / FedDG package)",
    how_to_get="download the Fundus package linked from github.com/EmmaW8/Dofe (used by github.com/liuquande/FedDG-ELCFS) "
    "and unpack it into retinal/Fundus/; for more sites add Domain<k> folders in the same layout",
    license="per site (REFUGE needs registration; Drishti-GS, RIM-ONE academic): never redistribute",
)
RETINAL_META = DatasetMeta(
    "retinal", 2, (3, 256, 256), *NONE3, used_by=("lgmix",), group_kind="site", task="segmentation"
)


# Upper bounds of the cup and disc classes in the gray mask, as thresholded by the DoFE/BEAL loaders
# [code: emma-sjwang/BEAL dataloaders/custom_transforms.py]: ≤ 50 cup, 51–200 rim, > 200 background.
CUP_MAX, DISC_MAX = 50, 200


def masks_from_gray(mask: np.ndarray) -> np.ndarray:
    """(N, 1, H, W) gray 0 = cup / 128 = rim / 255 = background → (N, 2, H, W) binary disc (cup included), cup.
    Intermediate values (interpolated borders) are assigned by the thresholds above."""
    return np.concatenate([(mask <= DISC_MAX), (mask <= CUP_MAX)], axis=1).astype(np.uint8)


@register_dataset(RETINAL_META, source=RETINAL_SOURCE, files=("Fundus",), num_groups=6, groups_param="sites")
def load_retinal(
    root: Path,
    verify: bool = True,
    sites: tuple[str, ...] | list[str] | None = None,
    image_size: int = 256,
    pool_splits: Annotated[bool, HashNeutral(False)] = False,  # added later: specs without it keep their hash
) -> DatasetArrays:
    fundus = root / "Fundus"
    if sites is None:
        sites = tuple(sorted(p.name for p in fundus.glob("Domain*") if p.is_dir())) if fundus.is_dir() else ()
    if not sites:
        raise missing_error("retinal", root, ["Fundus/Domain1/train/ROIs/image/*.png"], RETINAL_SOURCE.how_to_get)
    splits: dict[str, tuple[list[Path], list[Path], list[int]]] = {}
    for split in ("train", "test"):
        images, masks, groups = [], [], []
        for site_id, site in enumerate(sites):
            found = sorted((fundus / site / split / "ROIs" / "image").glob("*.png"))
            if not found:
                raise missing_error(
                    "retinal", root, [f"Fundus/{site}/{split}/ROIs/image/*.png"], RETINAL_SOURCE.how_to_get
                )
            images += found
            masks += [p.parent.parent / "mask" / p.name for p in found]
            groups += [site_id] * len(found)
        splits[split] = (images, masks, groups)
    missing = [str(m.relative_to(root)) for s in splits.values() for m in s[1] if not m.is_file()]
    if missing:
        raise missing_error("retinal", root, missing, "every image needs a mask of the same name under ROIs/mask/")
    rel = [str(p.relative_to(root)) for s in splits.values() for p in s[0] + s[1]]
    info = verify_files("retinal", root, [FileSpec(r) for r in rel], RETINAL_SOURCE.how_to_get, verify)

    def read(split: str):
        images, masks, groups = splits[split]
        x = read_images(images, image_size, "RGB", "retinal")
        m = read_images(masks, image_size, "L", "retinal", resample="nearest")
        if m.shape[-2:] != x.shape[-2:]:
            raise DataError("dataset 'retinal': image and mask sizes differ")
        return x, masks_from_gray(m), np.asarray(groups, dtype=np.int64)

    info.update(group_names=list(sites), image_size=image_size, files=["Fundus"] if len(rel) > 64 else rel)
    meta = replace(RETINAL_META, input_shape=(3, image_size, image_size))
    arrays = read_train_test(meta, read, "train", "test", info)
    return pool_train_test(arrays) if pool_splits else arrays
