"""The built-in FL methods, one file each, expressing only what differs from FedAvg (``algorithms/base.py``); the
catalogue in ``fedbench/algorithms/__init__.py`` declares each by name and imports its module on first use."""
