"""FedALA (Zhang et al., AAAI 2023): adaptive local aggregation of the global model before local training.

A returning client i does not overwrite its model θ_i with the global Θ^t. Its lower layers take Θ^t; its p higher
layers mix both element-wise (Eq. 5, the ALA module):
  θ̂_i = θ_i + (Θ^t − θ_i) ⊙ W_i          on the higher layers, W_i ∈ [0, 1] elementwise,
and W_i is learned on a random fraction s of the client's training data (Eq. 6):
  W_i ← clip_[0,1]( W_i − η ∇_{W_i} L(θ̂_i) ),   ∇_{W_i} L = ∇_{θ̂} L ⊙ (Θ^t − θ_i),
one update per mini-batch, θ̂_i rebuilt from the new W_i after each. W_i starts at 1 (θ̂_i = Θ^t). In the first round
in which a client aggregates adaptively, W_i trains until it converges — the standard deviation of the last
``loss_window`` epoch losses (each the epoch's last mini-batch's) below ``threshold``, as the authors' code checks it
[code: threshold 0.1, 10 losses], capped at ``max_first_epochs`` [proposal] — and in later rounds for one epoch
(§ "Adaptive local aggregation": W_i is trained to convergence only at the start, then reused) [paper].
The client then trains θ̂_i as FedAvg does and uploads it; the server is FedAvg.

On first participation θ̂_i = Θ^t (the client has no model of its own; the code skips ALA while θ_i = Θ). The sample
is drawn with ``randperm`` from the client's training split ([paper] "randomly sampled s%"; the code takes a
contiguous slice at a random start). "Layers" are the modules that hold parameters (a Linear's weight and bias are
one layer); the authors' code counts parameter tensors instead. During W_i's training the BatchNorm running
statistics the passes update are restored afterwards: ALA changes the weights only [proposal].
Defaults: s = 80 %, p = 1, η = 1.0 [paper]. ``layer_idx = 0`` mixes nothing: FedAvg.
Personal evaluation: θ̂_i from the client's latest θ_i and W_i with the current Θ (W_i not trained further)
[proposal: the code evaluates after the next round's ALA step]. No packed path: ALA runs per client before training.
"""

from __future__ import annotations

import statistics

import torch

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import load_weights
from fedbench.algorithms.losses import task_loss
from fedbench.algorithms.params import FedALAParams
from fedbench.algorithms.partial import parameter_mask, store_model


def higher_layer_names(model: torch.nn.Module, count: int) -> list[str]:
    """The parameters of the last ``count`` layers (modules holding parameters), in the model's order."""
    layers: list[str] = []
    for name, _ in model.named_parameters():
        layer = name.rpartition(".")[0]
        if not layers or layers[-1] != layer:
            layers.append(layer)
    chosen = set(layers[len(layers) - count :]) if count else set()
    return [name for name, _ in model.named_parameters() if name.rpartition(".")[0] in chosen]


class FedALA(Algorithm):
    Params = FedALAParams
    params: FedALAParams

    def bind_model(self, spec, model, input_shape, num_classes):
        super().bind_model(spec, model, input_shape, num_classes)
        self._higher = parameter_mask(model, higher_layer_names(model, self.params.layer_idx))

    def mixed(self, theta: torch.Tensor, glob: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """θ̂: Θ on the lower layers, θ + (Θ − θ) ⊙ W on the higher ones (Eq. 5)."""
        result = glob.clone()
        result[self._higher] = theta[self._higher] + (glob - theta)[self._higher] * weights
        return result

    def begin_local(self, ctx):
        if "local_params" not in ctx.state or not bool(self._higher.any()) or ctx.num_samples == 0:
            return  # first participation (θ̂ = Θ), no layer to mix (FedAvg), or no data to learn W_i on
        theta, glob = ctx.state["local_params"], ctx.current_params()
        first = "ala_weights" not in ctx.state
        weights = torch.ones(int(self._higher.sum()), dtype=glob.dtype, device=glob.device) if first else None
        weights = ctx.state.get("ala_weights", weights)
        buffers = ctx.current_buffers()
        size = ctx.num_samples
        sample = ctx.indices[torch.randperm(size, generator=ctx.generator, device=ctx.indices.device)]
        sample = sample[: max(1, int(self.params.rand_percent / 100 * size))]
        losses: list[float] = []
        for _ in range(self.params.max_first_epochs if first else 1):
            for x, y in ctx.batches(indices=sample, epochs=1):
                load_weights(ctx.model, self.mixed(theta, glob, weights))
                loss = task_loss(ctx.task, ctx.model(x), y)
                trained = [p for p in ctx.model.parameters() if p.requires_grad]
                grads = iter(torch.autograd.grad(loss, trained))
                grad = torch.cat(
                    [
                        next(grads).reshape(-1) if p.requires_grad else p.new_zeros(p.numel())
                        for p in ctx.model.parameters()
                    ]
                )
                # Eq. 6: ∇_W L = ∇_θ̂ L ⊙ (Θ − θ), then clipped to [0, 1]
                weights = (weights - self.params.eta * grad[self._higher] * (glob - theta)[self._higher]).clamp(0, 1)
            losses.append(float(loss.detach()))
            window = losses[-self.params.loss_window :]
            if len(losses) > self.params.loss_window and statistics.pstdev(window) < self.params.threshold:
                break
        ctx.state["ala_weights"] = weights.detach()
        load_weights(ctx.model, self.mixed(theta, glob, weights), buffers)

    def end_local(self, ctx, update):
        store_model(ctx, "local", update.params, update.buffers)

    def eval_model(self, ctx):
        if "ala_weights" in ctx.state:
            load_weights(
                ctx.model, self.mixed(ctx.state["local_params"], ctx.current_params(), ctx.state["ala_weights"])
            )
        return ctx.model
