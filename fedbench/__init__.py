"""fedbench: reproduce the tables of published federated-learning papers."""

__version__ = "0.1.0"
