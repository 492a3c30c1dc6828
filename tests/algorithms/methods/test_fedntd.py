"""FedNTD (Lee et al., NeurIPS 2022): the not-true distillation loss ignores the teacher's true-class logit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from global_formula_fixtures import ntd_by_hand

pytestmark = pytest.mark.usefixtures("linear_model")


@pytest.mark.usefixtures("float64")
def test_fedntd_loss_ignores_the_true_class_logit_of_the_teacher():
    torch.manual_seed(3)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 2, 1, 0])
    student, teacher = torch.randn(6, 3), torch.randn(6, 3)
    algorithm = build_algorithm("fedntd", {"beta": 0.7, "tau": 2.0})

    def loss_with(teacher_logits):
        ctx = type("Ctx", (), {"task": "classification"})()
        ctx.scratch = {"teacher_batch": (x, teacher_logits, None)}  # the per-batch teacher cache
        return algorithm.loss(ctx, x, y, student)

    expected = F.cross_entropy(student, y) + 0.7 * ntd_by_hand(student, teacher, y, 2.0)
    assert float(loss_with(teacher)) == pytest.approx(float(expected), rel=0, abs=F64_ATOL)
    moved = teacher.clone()
    moved[torch.arange(6), y] += torch.randn(6) * 10  # only the teacher's true-class logits
    assert torch.equal(loss_with(moved), loss_with(teacher))  # those logits are dropped: the same arithmetic
    other = teacher.clone()
    other[torch.arange(6), (y + 1) % 3] += 3.0  # a not-true logit does matter
    assert not torch.allclose(loss_with(other), loss_with(teacher), atol=1e-4)
