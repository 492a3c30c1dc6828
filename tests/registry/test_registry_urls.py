"""Registry URLs as shown to people (fedbench.registry.urls, docs/security.md): ``display_url`` masks the password
with ``***`` and leaves the rest of the URL as typed, also for a URL SQLAlchemy cannot parse; ``password_of`` is the
decoded password; ``scrub`` removes every spelling of it from a text, each spelling whole, and masks any other
``user:password@``. Every expected string below is written by hand from the URL it starts from."""

from __future__ import annotations

from fedbench.registry.urls import display_url, password_of, scrub


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
