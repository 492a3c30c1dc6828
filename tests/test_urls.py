"""URLs as shown to people (fedbench.urls, docs/security.md): ``display_url`` masks the password
with ``***`` and leaves the rest of the URL as typed, also for a URL SQLAlchemy cannot parse; ``password_of`` is the
decoded password; ``scrub`` removes every spelling of it from a text, each spelling whole, and masks any other
``user:password@`` (``mask_passwords``); ``hide_userinfo`` masks the whole user part of a storage URL. And which
database file a SQLite URL names (``sqlite_file``). Every expected string below is written by hand from the URL it
starts from."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from fedbench.urls import display_url, hide_userinfo, mask_passwords, password_of, scrub, sqlite_file


def test_display_url_masks_the_password_and_nothing_else():
    assert (
        display_url("postgresql+psycopg://alice:s3cret@db.example:5432/fedbench")
        == "postgresql+psycopg://alice:***@db.example:5432/fedbench"
    )
    assert display_url("postgresql://alice@db.example/fedbench") == "postgresql://alice@db.example/fedbench"
    assert display_url("sqlite:///registry/fedbench.db") == "sqlite:///registry/fedbench.db"


def test_display_url_of_a_url_sqlalchemy_cannot_parse_still_masks_the_password():
    """A space typed into the scheme: SQLAlchemy refuses the URL, the user:password@ part is masked by pattern."""
    assert display_url("postgres ql://alice:s3cret@db/fedbench") == "postgres ql://alice:***@db/fedbench"
    assert display_url("postgres ql://alice@db/fedbench") == "postgres ql://alice@db/fedbench"  # nothing to mask


def test_password_of_is_the_decoded_password_or_none():
    assert password_of("postgresql://alice:s3cret@db/fedbench") == "s3cret"
    assert password_of("postgresql://bob:p%40ss%2Fw@db/x") == "p@ss/w"  # "p@ss/w", URL-quoted in the URL
    assert password_of("postgresql://alice:@db/x") is None  # an empty password is none
    assert password_of("postgresql://alice@db/x") is None
    assert password_of("sqlite:///registry/fedbench.db") is None
    # unparseable by SQLAlchemy: found by pattern, decoded the same way
    assert password_of("postgres ql://alice:p%40ss@db/x") == "p@ss"
    assert password_of("postgres ql://alice@db/x") is None


def test_scrub_removes_each_spelling_of_the_password_whole():
    """The password "pa ss%" (a space, a percent sign) may be echoed as typed, quoted ("pa%20ss%25"), form-quoted
    ("pa+ss%25"): each becomes one ``***``. "pa ss%" is a prefix of no other spelling, but "secret%" is a prefix of
    its quoted form "secret%25": the longer spelling goes first, so no "25" is left behind."""
    url = "postgresql://alice:pa%20ss%25@db/x"
    assert password_of(url) == "pa ss%"
    text = "auth failed: 'pa ss%' / pa%20ss%25 / pa+ss%25"
    assert scrub(text, url) == "auth failed: '***' / *** / ***"
    url = "postgresql://alice:secret%25@db/x"
    assert password_of(url) == "secret%"
    assert scrub("password secret% refused (sent as secret%25) by postgresql://alice:secret%25@db/x", url) == (
        "password *** refused (sent as ***) by postgresql://alice:***@db/x"
    )


def test_scrub_masks_any_other_user_password_and_leaves_other_text_alone():
    assert scrub("cannot reach mysql://root:hunter2@db:3306/x", None) == "cannot reach mysql://root:***@db:3306/x"
    assert scrub("cannot reach mysql://root:hunter2@db/x", "sqlite:///r.db") == "cannot reach mysql://root:***@db/x"
    assert scrub("no such table: runs", "postgresql://alice:s3cret@db/x") == "no such table: runs"
    assert scrub("", "postgresql://alice:s3cret@db/x") == ""


def test_mask_passwords_masks_every_password_in_a_text_from_the_schemes_first_letter():
    text = "from s3.x-y://u:p%40ss@h/x and http://bob:pw@other/ too; ftp://:secret@h"
    assert mask_passwords(text) == "from s3.x-y://u:***@h/x and http://bob:***@other/ too; ftp://:***@h"
    assert mask_passwords("9x://a:b@c") == "9x://a:***@c" and mask_passwords("my_db://a:b@c") == "my_db://a:***@c"
    assert mask_passwords("http://a:p/w@h") == "http://a:***@h"  # a "/" typed unquoted in a password
    assert mask_passwords("9://a:b@c") == "9://a:b@c"  # no scheme: a scheme starts with a letter
    assert mask_passwords("postgresql://a:b c@h") == "postgresql://a:b c@h"  # a space ends a URL before any @
    assert mask_passwords("http://a/b:c@d") == "http://a/b:c@d"  # "b:c" is in the path
    assert mask_passwords("https://u@host/p and user:word@host") == "https://u@host/p and user:word@host"


def test_hide_userinfo_masks_the_whole_user_part_of_storage_urls_in_a_text():
    assert hide_userinfo("s3://KEY:SECRET@bucket/x") == "s3://***@bucket/x"
    assert hide_userinfo("https://TOKEN@host/p") == "https://***@host/p"  # a token alone is a credential too
    assert hide_userinfo("denied for gs://a:b@bkt/x and az://t@c/y") == "denied for gs://***@bkt/x and az://***@c/y"
    assert hide_userinfo("s3://bucket/path/a@b") == "s3://bucket/path/a@b"  # an @ after the host is in the path
    assert hide_userinfo("memory://bucket/x") == "memory://bucket/x"


@pytest.mark.parametrize(
    ("url", "database"),
    [
        ("sqlite:///runs/fedbench.db", "runs/fedbench.db"),
        ("sqlite:////abs/fedbench.db", "/abs/fedbench.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:%2Fdata%2Fmy%20runs.db?mode=ro&uri=true", "/data/my runs.db"),
        ("sqlite:///file:/data/runs.db?uri=1", "/data/runs.db"),
        ("sqlite:///file:/data/runs.db?uri=TRUE", "/data/runs.db"),
        ("sqlite:///file::memory:?uri=true", None),
        ("sqlite:///file:?uri=true", None),
        ("sqlite:///file:shared?mode=memory&cache=shared&uri=true", None),  # SQLite's in-memory database
        ("sqlite:///file:shared?mode=MEMORY&uri=true", None),
        ("sqlite:///file:shared%3Fmode=memory?uri=true", None),
        ("sqlite:///file:/data/runs.db%3Fcache=shared?uri=true", "/data/runs.db"),  # a query in the name part
        ("sqlite:///file:/data/runs.db?mode=rw&uri=true", "/data/runs.db"),
        ("sqlite:///file:/data/runs.db", "file:/data/runs.db"),  # without uri=true "file:" is part of the name
        ("sqlite:///file:/data/runs.db?uri=false", "file:/data/runs.db"),
        ("sqlite:///data/file:x.db?uri=true", "data/file:x.db"),  # a URI starts with file:
    ],
)
def test_the_database_file_a_sqlite_url_names(url, database):
    assert sqlite_file(make_url(url)) == database


def test_display_url_masks_the_password_and_scrub_removes_every_spelling():
    assert (
        display_url("postgresql://alice:Pa55-w0rd_9f3k@127.0.0.1:1/fedbench")
        == "postgresql://alice:***@127.0.0.1:1/fedbench"
    )
    assert display_url("sqlite:///registry/fedbench.db") == "sqlite:///registry/fedbench.db"
    encoded = "postgresql://bob:p%40ss%2Fw@db/x"  # the password "p@ss/w", URL-quoted as a URL must spell it
    assert password_of(encoded) == "p@ss/w"
    text = scrub(f"could not connect with {encoded}: password 'p@ss/w' rejected (p%40ss%2Fw)", encoded)
    assert "p@ss/w" not in text and "p%40ss%2Fw" not in text and "bob:***@db" in text
    # unparseable by SQLAlchemy (a typo in the scheme) still masked
    assert "Pa55-w0rd_9f3k" not in display_url("postgres ql://alice:Pa55-w0rd_9f3k@h/db")
