"""URLs shown to people: a password is never printed, stored or passed on in an error message. Every masking of a
URL in fedbench is done here.

A registry URL may carry a password (``postgresql://alice:PASSWORD@host/db``). Everything fedbench shows, writes
to the registry or raises goes through ``display_url`` (the URL with the password masked, as SQLAlchemy renders
it) or ``scrub`` (any text, e.g. a database driver's error message, with the password removed); a runs file
(``fedbench export``) has ``mask_passwords`` applied to its provenance and errors. The password need not be typed at
all: libpq reads ``PGPASSWORD``, ``~/.pgpass`` and service files (README, docs/security.md).

A checkpoint storage URL (``--checkpoints s3://…``) may carry its credential as the whole user part (a token, or
key and secret): ``hide_userinfo`` masks all of it.

It imports nothing else of fedbench, so every layer may use it: the registry and the checkpoint mirror do.
"""

from __future__ import annotations

import re
from urllib.parse import quote, quote_plus, unquote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

MASK = "***"
# scheme://user:password@ anywhere in a text: in something that looks like a URL but that SQLAlchemy cannot parse (a
# typo in the scheme), in a driver's message, in a stored provenance. A scheme starts with a letter; a space ends a
# URL before any @; a ":" after a "/" is in the path, not between a user and a password.
_USERINFO = re.compile(r"(?P<head>[A-Za-z][\w+.\-]*://[^:/@\s]*):(?P<password>[^@\s]*)@")
# ://userinfo@ of a storage URL: user and password (or a token standing alone) are masked together.
_STORAGE_USERINFO = re.compile(r"(?<=://)[^/@]*@")


def mask_passwords(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it replaced by ``***``."""
    return _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)


def display_url(url: str | URL) -> str:
    """``url`` as it may be shown to a person: the password, if any, replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return mask_passwords(str(url))


def hide_userinfo(text: str) -> str:
    """``text`` (a storage URL, or an error message quoting one) with every ``://user:secret@`` part, the user
    included, replaced by ``***``: storage URLs may carry a token as the user."""
    return _STORAGE_USERINFO.sub(f"{MASK}@", text)


def password_of(url: str) -> str | None:
    """The password a URL carries (None if it has none)."""
    try:
        password = make_url(url).password
    except (ArgumentError, ValueError, TypeError):
        found = _USERINFO.search(url)
        password = unquote(found.group("password")) if found else None
    return str(password) if password else None


def scrub(text: str, url: str | None) -> str:
    """``text`` with the password of ``url`` removed, in every spelling a driver may echo (as typed, URL-quoted,
    decoded), and any other ``user:password@`` masked: for error messages, stored errors and tracebacks."""
    if not text:
        return text
    password = password_of(url) if url else None
    if password:
        spellings = {password, quote(password, safe=""), quote_plus(password), unquote(password)}
        for spelling in sorted((s for s in spellings if s), key=len, reverse=True):
            text = text.replace(spelling, MASK)
    return mask_passwords(text)


def sqlite_file(parsed: URL) -> str | None:
    """The database file of a SQLite URL (``sqlite:///path`` or a ``file:`` URI with ``uri=true``); None in memory."""
    database = parsed.database
    if not database or database == ":memory:":
        return None
    if str(parsed.query.get("uri", "")).lower() in ("true", "1") and database.startswith("file:"):
        path = unquote(database[len("file:") :].split("?", 1)[0])
        # mode=memory: in the URL's query (SQLAlchemy hands it on to SQLite's URI) or in the file name part
        in_memory = str(parsed.query.get("mode", "")).lower() == "memory" or "mode=memory" in database
        return None if path in ("", ":memory:") or in_memory else path
    return database


__all__ = ["display_url", "hide_userinfo", "mask_passwords", "password_of", "scrub", "sqlite_file", "MASK"]
