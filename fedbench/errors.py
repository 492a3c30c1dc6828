"""Errors a user can cause. The CLI prints their message on one line and exits with code 2."""


class FedbenchError(Exception):
    """Base class: a user-facing error whose message names the file/key/value and what to do."""

    exit_code = 2


class RecipeError(FedbenchError):
    """A recipe file is missing, malformed, or has an unknown key or a bad value."""


class UnknownNameError(FedbenchError):
    """An algorithm, model, dataset or partitioner name that is not registered."""


class DataError(FedbenchError):
    """Data set files are missing, corrupt, or in an unexpected format."""


class RegistryError(FedbenchError):
    """The run registry cannot be opened or a run id does not exist."""


class ConfigError(FedbenchError):
    """A run configuration (spec values, CLI overrides) is inconsistent."""


class RunDiverged(Exception):
    """Raised inside the engine when loss or weights become NaN/inf; carries the round."""

    def __init__(self, round_index: int, what: str):
        super().__init__(f"diverged at round {round_index}: {what}")
        self.round_index = round_index
        self.what = what


class RunsFileError(FedbenchError):
    """A runs file given to `fedbench import` is malformed (names the line and key)."""
