"""Local training: every client trains its own model alone and never communicates (the "client standalone"
baseline of LG-Mix Fig. 2b; FedDr+ Table 3 "Local only (L_CE)").

A client's model starts from the common initialisation w^0 and lives in ``ctx.state``; the server averages
nothing, so the "global" model stays w^0. Train longer with ``rounds`` × ``local_epochs`` (FedDr+ [code]
runs 160 epochs, lr 0.1 decayed at 80/120: express it as rounds = 160, local_epochs = 1 and a step schedule).
Use ``eval_mode = "personal"``: the global model carries no information here.
"""

from fedbench.algorithms import register_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.partial import restore_model, store_model


@register_algorithm("local", papers=("lgmix", "feddrplus"))
class Local(Algorithm):
    """Each client minimises only its own empirical risk F_k(w_k)."""

    def aggregate(self, server, updates, round_index):
        """Nothing is shared: the server keeps w^0."""

    def begin_local(self, ctx):
        restore_model(ctx, "personal", ctx.model)   # else w^0, the server's (never updated) weights

    def end_local(self, ctx, update):
        store_model(ctx, "personal", update.params, update.buffers)

    def eval_model(self, ctx):
        restore_model(ctx, "personal", ctx.model)
        return ctx.model
