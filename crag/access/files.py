"""The access file of a local documents folder: who may read which files, and (optionally) which
users are in which local groups. It gives a folder the permissions SharePoint gives its items
(crag/core/access.py), so access trimming works, and is testable, without Microsoft Graph.

`<docs>/.access.toml` (hidden: never indexed nor served), or the file CRAG_ACCESS_FILE names:

    [[rule]]                      # everything: the whole organization
    files = "**"
    allow = ["*"]

    [[rule]]                      # the HR folder: the HR group only
    files = ["hr/", "payroll/*.xlsx"]
    allow = ["hr"]

    [groups]                      # local groups: name -> members (users' object ids or other groups)
    hr = ["9f6c3e0a-…", "hr-managers"]
    hr-managers = ["41d2…"]

Rules are read top to bottom and the LAST rule whose pattern matches a file decides who may read
it (general rules first, exceptions after, as in CODEOWNERS). A file no rule matches has unknown
permissions (denied while trimming is on, unless CRAG_ACCESS_UNKNOWN=allow). `allow = []` lets
nobody read the files.

Patterns are matched against the whole path relative to the folder, with forward slashes, case
sensitive: `*` and `?` stay within one folder level, `**` (a whole segment) spans any number of
levels, `[abc]` is a set of characters, and a pattern ending in `/` is everything under a folder.
`*.md` therefore matches only top-level files; `**/*.md` matches them at every level.

Principals are Entra object ids (of users or groups), names of the groups defined under [groups],
or `*` for everyone; they are compared case-insensitively. A file that cannot be read or checked
raises AccessFileError, whose message names the file and the problem: the index is then not built
(at start) or the previous one keeps serving (while watching), never with the rules left out.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from crag.core.access import EVERYONE, normalize

# A principal as written: `*`, or letters, digits and . _ @ - (GUIDs, group names, UPN-like names).
# No comma, quote or space: a principal goes into an OData search.in list as it is.
_PRINCIPAL = re.compile(r"^(\*|[A-Za-z0-9][A-Za-z0-9._@-]{0,127})$")
_GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class AccessFileError(ValueError):
    """The access file cannot be used; the message names the file and what is wrong (safe to show)."""


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: str | list[str]
    allow: list[str]


class _FileModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: list[_RuleModel] = []
    groups: dict[str, list[str]] = {}


@dataclass(frozen=True)
class Rule:
    number: int  # 1-based position in the file, for messages
    patterns: tuple[str, ...]
    allow: tuple[str, ...]  # normalized principals
    _regexes: tuple[re.Pattern[str], ...] = field(repr=False, default=())

    def matches(self, rel: str) -> bool:
        return any(r.fullmatch(rel) for r in self._regexes)


@dataclass(frozen=True)
class AccessFile:
    """The parsed file; an empty one (no rules, no groups) when the folder has none."""

    path: Path | None = None
    rules: tuple[Rule, ...] = ()
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # group -> members
    digest: str = ""  # sha256 of the file's bytes ("" without a file): part of the index fingerprint
    warnings: tuple[str, ...] = ()  # likely mistakes that do not stop the build (logged)

    def allowed_for(self, rel: str) -> tuple[str, ...] | None:
        """Who may read the file at this relative path: the last matching rule's principals, or
        None (unknown) when no rule matches."""
        for rule in reversed(self.rules):
            if rule.matches(rel):
                return rule.allow
        return None

    def unmatched_rules(self, files: Collection[str]) -> list[Rule]:
        """Rules that match none of the files (a typo in a pattern, most often)."""
        return [r for r in self.rules if not any(r.matches(f) for f in files)]

    def groups_of(self, principal: str) -> tuple[str, ...]:
        """The local groups a user (or group) belongs to, directly or through other groups."""
        parents: dict[str, set[str]] = {}
        for group, members in self.groups.items():
            for member in members:
                parents.setdefault(member, set()).add(group)
        found: set[str] = set()
        pending = [principal.strip().lower()]
        while pending:
            for group in parents.get(pending.pop(), ()):
                if group not in found:  # a cycle of groups ends here
                    found.add(group)
                    pending.append(group)
        return tuple(sorted(found))


def read_access_file(path: Path, required: bool = False) -> AccessFile:
    """The access file at `path`; an empty AccessFile when it does not exist and is not required
    (the folder's default location). Raises AccessFileError."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if required:
            raise AccessFileError(f"access file {path} not found (CRAG_ACCESS_FILE)") from None
        return AccessFile()
    except OSError as exc:
        raise AccessFileError(f"access file {path} cannot be read ({exc.strerror or exc})") from None
    return parse_access_file(raw, path)


def access_file_digest(path: Path) -> str | None:
    """The file's content hash, or None when there is none: what the index fingerprint records."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None
    except OSError:
        return "unreadable"  # the build then reports why


def parse_access_file(raw: bytes, path: Path) -> AccessFile:
    where = f"access file {path}"
    try:
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise AccessFileError(f"{where}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise AccessFileError(f"{where}: not valid TOML ({exc})") from None
    try:
        model = _FileModel.model_validate(data)
    except ValidationError as exc:
        problems = [f"{_location(e['loc'])}: {e['msg']}" for e in exc.errors()[:3]]
        raise AccessFileError(f"{where}: {'; '.join(problems)}") from None
    groups: dict[str, tuple[str, ...]] = {}
    for name, members in model.groups.items():
        group = _principal(name, f"{where}: [groups]", allow_everyone=False)
        groups[group] = normalize(
            _principal(m, f"{where}: [groups] {name}", allow_everyone=False) for m in members
        )
    rules = []
    warnings: list[str] = []
    for number, spec in enumerate(model.rule, 1):
        patterns = (spec.files,) if isinstance(spec.files, str) else tuple(spec.files)
        if not patterns:
            raise AccessFileError(f"{where}: rule {number}: files is empty")
        regexes = tuple(_glob(p, f"{where}: rule {number}") for p in patterns)
        allow = normalize(_principal(p, f"{where}: rule {number}: allow") for p in spec.allow)
        for principal in allow:
            if principal != EVERYONE and principal not in groups and not _GUID.match(principal):
                warnings.append(
                    f"rule {number} allows {principal!r}, neither a group of [groups] nor an Entra "
                    "object id (a GUID): a typo?"
                )
        rules.append(Rule(number, patterns, allow, regexes))
    digest = hashlib.sha256(raw).hexdigest()
    return AccessFile(path, tuple(rules), groups, digest, tuple(warnings))


def _principal(value: str, where: str, allow_everyone: bool = True) -> str:
    value = value.strip()
    if not _PRINCIPAL.match(value) or (value == EVERYONE and not allow_everyone):
        what = "an Entra object id, a group of [groups]" + (" or '*'" if allow_everyone else "")
        raise AccessFileError(f"{where}: {value!r} is not a principal ({what})")
    return value.lower()


def _location(loc: Iterable[int | str]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"{parts.pop() if parts else 'item'} {item + 1}")
        else:
            parts.append(str(item))
    return ": ".join(parts)


def _glob(pattern: str, where: str) -> re.Pattern[str]:
    """The regular expression of a pattern (see the module's documentation)."""
    original = pattern
    if "\\" in pattern:
        raise AccessFileError(f"{where}: pattern {original!r}: use forward slashes")
    pattern = pattern.strip().removeprefix("./").removeprefix("/")
    if pattern.endswith("/"):
        pattern += "**"
    parts = pattern.split("/")
    if not pattern or any(p in ("", ".", "..") for p in parts):
        raise AccessFileError(f"{where}: pattern {original!r} is not a path under the folder")
    out = []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        elif "**" in part:
            raise AccessFileError(f"{where}: pattern {original!r}: ** must be a whole path segment")
        else:
            out.append(_segment(part) + ("" if last else "/"))
    return re.compile("".join(out))


def _segment(part: str) -> str:
    out = []
    i = 0
    while i < len(part):
        ch = part[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and (end := part.find("]", i + 1)) > i + 1:
            body = part[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append(("[^/" if negate else "[") + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)
