"""One run's working state, built once by the engine (``RunState``), and the random streams of each purpose a client
is handed to a method for: its ``client_context`` factory builds every context an algorithm hook receives (training,
personalised evaluation, fine-tuning), so the three cannot drift apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

from fedbench.algorithms.context import ClientContext, ServerState, SpareModels, load_weights
from fedbench.engine.client_states import ClientStates
from fedbench.seeding import derive_seed, torch_generator
from fedbench.settings import EVAL_BATCH_SIZE  # test samples per forward pass: its one default
from fedbench.spec import RunSpec

if TYPE_CHECKING:
    from fedbench.data.federated import FederatedData


Purpose = Literal["train", "eval", "finetune"]
# (batch/augmentation generator stream, dropout seed stream) of each purpose (``fedbench.seeding``)
RANDOM_STREAMS: dict[str, tuple[str, str]] = {
    "train": ("client", "dropout"),
    "eval": ("eval", "eval-dropout"),
    "finetune": ("finetune", "finetune-dropout"),
}


@dataclass
class RunState:
    """One run's working state, built once by the engine: its spec, data, the one working model, the server state,
    every client's persistent ``state`` (checkpointed) and the spare frozen models. ``client_context`` builds every
    context an algorithm hook receives, so the three places that hand a client to an algorithm (local training,
    personalised evaluation, fine-tuning) cannot drift apart."""

    spec: RunSpec
    data: FederatedData
    model: nn.Module
    server: ServerState
    device: torch.device
    spare_models: SpareModels
    eval_batch_size: int = EVAL_BATCH_SIZE
    # the store of every client's state (``client_states.py``: resident up to a budget, spilled to files); a plain
    # dict given here (tests that build a RunState by hand) becomes an in-memory store
    client_states: ClientStates = field(default_factory=ClientStates)
    frozen: torch.Tensor | None = None  # parameters the model fixes (ETF classifiers), over the flat vector
    optimizer_options: dict[str, Any] = field(default_factory=dict)  # every client optimizer's (``accel``)

    def __post_init__(self) -> None:
        if not isinstance(self.client_states, ClientStates):
            self.client_states = ClientStates(self.client_states)

    def client_context(
        self,
        algorithm,
        client: int,
        round_index: int,
        *,
        purpose: Purpose = "train",
        lr: float,
        payload: dict[str, Any] | None = None,
        spec: RunSpec | None = None,
        server: ServerState | None = None,
    ) -> ClientContext:
        """Load the weights the client starts from (``server``'s, default the run's) into the working model, seed
        torch's global RNG for dropout and build the context ``algorithm``'s hooks receive, with the client's
        training indices split by ``algorithm.local_split``. Every purpose has its own random streams,
        keyed by (round, client) — by client alone for fine-tuning, which happens once — so neither evaluation
        nor fine-tuning moves a training stream. ``train`` hands the client its persistent state, ``eval`` and
        ``finetune`` a deep copy: whatever their hooks do to it, training state stays as it was. ``spec``: the
        spec the client trains under (fine-tuning's epochs, optimizer and batch size); default the run's."""
        server = self.server if server is None else server
        spec = self.spec if spec is None else spec
        generator_stream, dropout_stream = RANDOM_STREAMS[purpose]
        keys = (client,) if purpose == "finetune" else (round_index, client)
        load_weights(self.model, server.params, server.buffers)
        torch.manual_seed(derive_seed(self.spec.seed, dropout_stream, *keys))
        if purpose == "train":
            state = self.client_states.setdefault(client, {})
        else:  # evaluation and fine-tuning never change training state
            state = self.client_states.peek(client)
        indices, holdout = algorithm.local_split(spec, client, self.data.client_train[client])
        return ClientContext(
            spec=spec,
            client_id=client,
            round_index=round_index,
            model=self.model,
            server=server,
            payload={} if payload is None else payload,
            state=state,
            data=self.data.tensors,
            indices=indices,
            holdout=holdout,
            device=self.device,
            lr=lr,
            generator=torch_generator(self.spec.seed, generator_stream, *keys, device=self.device),
            spare_models=self.spare_models,
            optimizer_options=self.optimizer_options,
        )
