"""Checkpoints: the file format, atomic writes, where a run's checkpoint lives, object-storage mirrors."""
