"""Local training: every client trains its own model alone and never communicates (the "client standalone"
baseline of LG-Mix Fig. 2b; FedDr+ Table 3 "Local only (L_CE)", "(L_CE+ETF)" and "(L_DR)").

A client's model starts from the common initialisation w^0 and lives in ``ctx.state``; the server averages
nothing, so the "global" model stays w^0. Train longer with ``rounds`` × ``local_epochs`` (FedDr+ [code]
runs 160 epochs, lr 0.1 decayed at 80/120: express it as rounds = 160, local_epochs = 1 and a step schedule).
Use ``eval_mode = "personal"``: the global model carries no information here.

``loss`` picks the objective: ``ce`` (the task's default loss: cross-entropy, Dice for segmentation) or ``dr``,
Dot-Regression's L_DR through a frozen simplex ETF (``dot_regression_loss``; build the model with
``model_params.classifier = "etf"``, checked when the run starts). FedDr+ spec §3.2 / ambiguity 16:
lr 5.0 for L_DR [proposal].
"""

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.fixed_classifier import require_classifier
from fedbench.algorithms.methods.dot_regression import dot_regression_loss
from fedbench.algorithms.params import LocalParams
from fedbench.algorithms.partial import restore_model, store_model


class Local(Algorithm):
    """Each client minimises only its own empirical risk F_k(w_k)."""

    Params = LocalParams
    params: LocalParams

    def aggregate(self, server, updates, round_index):
        """Nothing is shared: the server keeps w^0."""

    def check_model(self, model, setting):
        if self.params.loss == "dr":
            require_classifier(model, "etf", f"{setting} with algorithm_params.loss = 'dr'")

    def begin_local(self, ctx):
        restore_model(ctx, "personal", ctx.model)  # else w^0, the server's (never updated) weights

    def loss(self, ctx, x, y, logits):
        if self.params.loss == "dr":
            return dot_regression_loss(logits, y)
        return super().loss(ctx, x, y, logits)

    def end_local(self, ctx, update):
        store_model(ctx, "personal", update.params, update.buffers)

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)
        return ctx.model
