"""MobileNet (``fedbench/models/mobilenet.py``): FedDr+'s BatchNorm keeps no running statistics."""

from __future__ import annotations

from model_fixtures import build_meta


def test_mobilenet_batchnorm_keeps_no_running_stats():
    # FedDr+ spec §2.4: track_running_stats=False, so there are no BN buffers to aggregate.
    assert list(build_meta("mobilenet").buffers()) == []
    assert len(list(build_meta("mobilenet", track_running_stats=True).buffers())) == 3 * 27
