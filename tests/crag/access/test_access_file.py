"""The access file (crag/access/files.py) and where readers come from (crag/access/membership.py): rule
order, patterns, clear errors for a bad file, local groups, and a membership source that fails
closed or is cached for a while."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from crag.access.files import AccessFileError, parse_access_file, read_access_file
from crag.access.membership import CachedMembership, LocalMembership, reader_for
from crag.core.access import EVERYONE, reader_of, scope

GUID_A = "aaaaaaaa-0000-4000-8000-00000000000a"


def parse(text: str) -> object:
    return parse_access_file(text.encode(), Path("/docs/.access.toml"))


def test_the_last_matching_rule_decides_and_unmatched_files_are_unknown() -> None:
    rules = parse_access_file(
        b"""
[[rule]]
files = "**"
allow = ["*"]

[[rule]]
files = ["hr/", "finance/*.xlsx"]
allow = ["HR", "finance"]

[[rule]]
files = "hr/public/**/*.md"
allow = ["*", "hr"]

[[rule]]
files = "hr/legal-hold.md"
allow = []

[groups]
hr = []
finance = []
""",
        Path("/docs/.access.toml"),
    )
    assert rules.allowed_for("handbook.md") == ("*",)
    assert rules.allowed_for("hr/pay.md") == ("finance", "hr")  # normalized: sorted, lower-case
    assert rules.allowed_for("hr/deep/er/pay.md") == ("finance", "hr")
    assert rules.allowed_for("finance/q1.xlsx") == ("finance", "hr")
    assert rules.allowed_for("finance/sub/q1.xlsx") == ("*",)  # * stays within one folder level
    assert rules.allowed_for("hr/public/a/b/faq.md") == ("*", "hr")  # a later rule wins
    assert rules.allowed_for("hr/public/faq.md") == ("*", "hr")  # ** spans zero levels too
    assert rules.allowed_for("hr/legal-hold.md") == ()  # nobody
    assert rules.allowed_for("HR/pay.md") == ("*",)  # patterns are case sensitive
    without_catch_all = parse_access_file(b'[[rule]]\nfiles = "hr/"\nallow = ["*"]', Path("x"))
    assert without_catch_all.allowed_for("handbook.md") is None  # unknown
    assert [r.number for r in without_catch_all.unmatched_rules(["handbook.md"])] == [1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[rule]]\nfiles = "hr/"\nallow = ["*"\n', "not valid TOML"),
        ('[[rule]]\nfiles = "hr/"\nalow = ["*"]', "rule 1: alow: Extra inputs are not permitted"),
        ('[[rule]]\nfiles = "hr/"', "rule 1: allow: Field required"),
        (
            '[[rule]]\nfiles = "a"\nallow = ["*"]\n[[rule]]\nfiles = "b"\nallow = ["x y"]',
            "rule 2: allow: 'x y'",
        ),
        ('[[rule]]\nfiles = "a"\nallow = ["hr,finance"]', "is not a principal"),
        ('[[rule]]\nfiles = "hr**/x"\nallow = ["*"]', "** must be a whole path segment"),
        ('[[rule]]\nfiles = "../etc/*"\nallow = ["*"]', "is not a path under the folder"),
        ('[[rule]]\nfiles = "hr\\\\pay.md"\nallow = ["*"]', "use forward slashes"),
        ('[[rule]]\nfiles = []\nallow = ["*"]', "files is empty"),
        ('[groups]\nhr = ["*"]', "[groups] hr: '*' is not a principal"),
        ("rules = 3", "rules: Extra inputs are not permitted"),
    ],
)
def test_a_bad_file_names_the_file_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(AccessFileError) as caught:
        parse(text)
    assert message in str(caught.value) and "/docs/.access.toml" in str(caught.value)


def test_reading_the_file(tmp_path: Path) -> None:
    path = tmp_path / ".access.toml"
    assert read_access_file(path).rules == ()  # the folder's optional file: none, no rules
    with pytest.raises(AccessFileError, match="not found"):
        read_access_file(path, required=True)  # CRAG_ACCESS_FILE named it: it must exist
    path.write_bytes(b"\xff\xfe[[rule]]")
    with pytest.raises(AccessFileError, match="not UTF-8"):
        read_access_file(path)
    path.write_text('[[rule]]\nfiles = "**"\nallow = ["hr-team", "' + GUID_A.upper() + '"]\n', "utf-8")
    rules = read_access_file(path)
    assert rules.allowed_for("x.md") == ("aaaaaaaa-0000-4000-8000-00000000000a", "hr-team")
    # A principal that is neither a GUID nor a local group is most likely a typo: said, not fatal.
    assert rules.warnings == (
        "rule 1 allows 'hr-team', neither a group of [groups] nor an Entra object id (a GUID): a typo?",
    )


def test_local_groups_are_transitive_and_survive_cycles() -> None:
    rules = parse_access_file(
        f"""
[groups]
hr = ["hr-managers", "{GUID_A}"]
hr-managers = ["ceo", "hr"]
board = ["ceo"]
""".encode(),
        Path("x"),
    )
    assert rules.groups_of(GUID_A.upper()) == ("hr", "hr-managers")
    assert rules.groups_of("ceo") == ("board", "hr", "hr-managers")
    assert rules.groups_of("nobody") == ()


def test_readers_and_their_cache_scope() -> None:
    assert reader_of(None) == frozenset({EVERYONE})
    assert reader_of(GUID_A.upper(), ["G1", " g1 ", ""]) == frozenset({EVERYONE, GUID_A, "g1"})
    assert scope(None) == ""
    assert scope(reader_of("u", ["g"])) == scope(frozenset({"g", "*", "u"}))
    assert scope(reader_of("u", ["g"])) != scope(reader_of("u"))


async def test_local_membership_follows_edits_and_keeps_the_last_good_groups(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / ".access.toml"
    source = LocalMembership(path)
    assert await source.groups_of(GUID_A) == ()  # no file: no groups
    path.write_text(f'[groups]\nhr = ["{GUID_A}"]\n', "utf-8")
    assert await source.groups_of(GUID_A) == ("hr",)
    path.write_text(f'[groups]\nlegal = ["{GUID_A}"]\n', "utf-8")  # moved to another group
    assert await source.groups_of(GUID_A) == ("legal",)
    with caplog.at_level(logging.ERROR):
        path.write_text("[groups\n", "utf-8")
        assert await source.groups_of(GUID_A) == ("legal",)
        assert await source.groups_of(GUID_A) == ("legal",)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "not valid TOML" in errors[0].getMessage() and not errors[0].exc_info


class FakeGraphMembership:
    """A remote source's behaviour (the Graph one is built on branch `graph`): counted, slow, failing."""

    name = "fake-remote"

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False
        self.groups: tuple[str, ...] = ("g1",)

    async def groups_of(self, user_id: str) -> tuple[str, ...]:
        self.calls += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise ConnectionError("graph unreachable")
        return self.groups


async def test_a_failing_source_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    source = FakeGraphMembership()
    assert await reader_for(GUID_A, source) == frozenset({EVERYONE, GUID_A, "g1"})
    source.fail = True
    with caplog.at_level(logging.WARNING):
        assert await reader_for(GUID_A, source) == frozenset({EVERYONE, GUID_A})
    [line] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "ConnectionError" in line.getMessage() and not line.exc_info
    assert await reader_for(None, source) == frozenset({EVERYONE})  # no user: EVERYONE, no lookup


async def test_cached_membership_keeps_answers_for_the_ttl() -> None:
    now = [0.0]
    source = FakeGraphMembership()
    cached = CachedMembership(source, ttl_s=60, clock=lambda: now[0])
    # Concurrent questions of one user: one lookup.
    assert await asyncio.gather(*(cached.groups_of(GUID_A) for _ in range(5))) == [("g1",)] * 5
    assert source.calls == 1
    source.groups = ("g2",)  # removed from g1 at the source
    now[0] = 59.0
    assert await cached.groups_of(GUID_A.upper()) == ("g1",) and source.calls == 1
    now[0] = 61.0
    assert await cached.groups_of(GUID_A) == ("g2",) and source.calls == 2  # the TTL is over
    source.fail = True
    now[0] = 200.0
    with pytest.raises(ConnectionError):
        await cached.groups_of(GUID_A)
    source.fail = False
    assert await cached.groups_of(GUID_A) == ("g2",)  # a failure is not kept: asked again
