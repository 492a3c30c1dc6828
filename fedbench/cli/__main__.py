"""``python -m fedbench.cli``: the same as the ``fedbench`` command."""

from fedbench.cli import main

main()
