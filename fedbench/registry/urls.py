"""Registry URLs shown to people: the password is never printed, stored or passed on in an error message.

A registry URL may carry a password (``postgresql://alice:PASSWORD@host/db``). Everything fedbench shows, writes
to the registry or raises goes through ``display_url`` (the URL with the password masked, as SQLAlchemy renders
it) or ``scrub`` (any text, e.g. a database driver's error message, with the password removed). The password
need not be typed at all: libpq reads ``PGPASSWORD``, ``~/.pgpass`` and service files (README, docs/security.md).
"""

from __future__ import annotations

import re
from urllib.parse import quote, quote_plus, unquote

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

MASK = "***"
# user:password@ in something that looks like a URL but that SQLAlchemy cannot parse (a typo in the scheme)
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*):(?P<password>[^@\s]*)@")


def display_url(url: str) -> str:
    """``url`` as it may be shown to a person: the password, if any, replaced by ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError, TypeError):
        return _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", url)


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
    return _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)


__all__ = ["display_url", "password_of", "scrub", "MASK"]
