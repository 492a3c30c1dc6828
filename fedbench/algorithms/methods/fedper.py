"""FedPer (Arivazhagan et al., 2019): base layers shared, personalisation (head) layers local.

Every round a client loads the global body with its own head, trains the whole model for E local epochs
(FedDr+ spec §3.2, FedBABU [code pfl] ``local_upt_part=full``) and uploads it; the server averages only the
body (``aggr_part=body``). The head never leaves the client; it starts as the common w^0 head.
"""

from fedbench.algorithms.partial import PartialPersonalization


class FedPer(PartialPersonalization):
    def local_parameter_names(self, model):
        return model.head_parameter_names()
