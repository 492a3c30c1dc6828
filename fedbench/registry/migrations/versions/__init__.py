"""The registry's revisions, oldest first; a package so the layers check (lint-imports) reads their imports."""
