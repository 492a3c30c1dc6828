"""The engine contract, checked on one method: what the engine promises every method, and every method must keep so
that the promise holds, run on a small setting (a few rounds of a few clients on digits, on the CPU, seconds per
property). ``fedbench check-method NAME`` runs it on a method of the user's own (a plug-in); the built-ins pass it
(tests/execution/contract/test_builtin_methods.py runs it on every one).

The properties (``PROPERTIES``, in the order they run):

- ``evaluation``: evaluation leaves training unchanged. The run evaluated every round (the global model and every
  client's own) and the run evaluated after its last round only train the same, bit for bit: the same training
  losses, last-round figures, global weights and client states.
- ``keyed-streams``: a client's training randomness comes from its own keyed streams (``fedbench.seeding``), so
  results depend neither on the order the round's clients train in nor on what the process ran before (another
  worker's history): the run with every round's clients trained last to first, after the process's global random
  generators were seeded otherwise, gives the same results bit for bit.
- ``resume``: a run stopped after round R − 1 (logged and checkpointed, as a kill between rounds leaves it) and
  resumed from its checkpoint gives the uninterrupted run's curve, global weights and client states, bit for bit.
- ``packed``: a method that declares ``packed_step`` trains the same on the packed path (``engine/packed.py``) as on
  the sequential one: in float64, to within ``F64_ATOL`` (the two sum in another order).
- ``fedavg-setting``: a method that declares a setting in which it is FedAvg trains as FedAvg does in it, the same
  curve: in the runs' own dtype (float32) over at least ``FEDAVG_SETTING_ROUNDS`` rounds, every parameter and buffer
  after every round and the curve's training losses and global figures, bit for bit. A difference only at rounding
  level (``ROUNDING_ULPS``, with float64 runs agreeing to within ``F64_ATOL``) fails as "equal up to rounding": in
  float32 the rounding compounds, round after round, into another curve.
- ``empty-client``: with every client training every round and one of them holding no training sample, the run
  finishes and its losses, global weights and client states stay finite.
- ``diagnostics``: recording every diagnostic the method can have, every round (``fedbench/vocab/diagnostics.py``;
  those of source "method" only if it reports them), leaves training unchanged: the curve, global weights and
  client states of the run without diagnostics, bit for bit; every round records them all; and a run stopped after
  round R − 1 and resumed records the same diagnostics as the uninterrupted one.

A method declares the setting in which it is FedAvg when it registers (``fedavg_setting``, ``setting.py``).

Every result says what was compared; a failure says what differed first (the round and figure, or the tensor, and
by how much) and how to fix it. Bit for bit means in the default dtype (float32), on this machine, in one process.

The package: ``setting.py`` (the specs the checks train, resolved by ``fedbench.recipes.resolve``), ``runs.py``
(``Checker``: the runs), ``compare.py`` (where two runs differ), ``properties.py`` (``PROPERTIES``: each property's
check and its texts), ``check.py`` (``check_method``).
"""

from fedbench.execution.contract.check import PropertyResult, check_method
from fedbench.execution.contract.compare import F64_ATOL, ROUNDING_ULPS
from fedbench.execution.contract.properties import FEDAVG_SETTING_ROUNDS, PROPERTIES, Property, docs_table
from fedbench.execution.contract.runs import Checker
from fedbench.execution.contract.setting import SETUP, contract_spec, fedavg_setting_spec

__all__ = [
    "F64_ATOL",
    "FEDAVG_SETTING_ROUNDS",
    "PROPERTIES",
    "ROUNDING_ULPS",
    "SETUP",
    "Checker",
    "Property",
    "PropertyResult",
    "check_method",
    "contract_spec",
    "docs_table",
    "fedavg_setting_spec",
]
