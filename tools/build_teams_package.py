"""Build the Teams app package: a zip with manifest.json, color.png, outline.png and the language files
(ja-jp.json) at its root.

    python tools/build_teams_package.py [--out dist/crag-teams-app.zip] [--env-file .env]

Reads the settings the bot reads (environment, then `.env` in the working directory):

- `MicrosoftAppId` (required, a GUID): the bot's Azure app id, used as the manifest's `botId`;
- `PUBLIC_BASE_URL` (required, https): its host becomes the manifest's `validDomains`;
- `BOT_NAME`: the app's short name (at most 30 characters) and the start of its full name;
- `TEAMS_APP_ID` (optional GUID): the Teams app id; default a stable UUID derived from the app id,
  so that every build for the same bot updates the same Teams app;
- `TEAMS_APP_VERSION` (optional X.Y.Z): default the project version from pyproject.toml.

It fills the `${{NAME}}` placeholders of appPackage/manifest.json, validates the result against the
Teams manifest schema v1.22 (appPackage/schema/) plus the limits Teams applies beyond it, does the
same for each language file named by `localizationInfo.additionalLanguages` (filled the same way,
against the Teams localization schema v1.22; every key must name a string of the manifest), checks
the icons, and writes the zip. On any problem it prints every error and exits with status 2.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tomllib
import uuid
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
from PIL import Image
from pydantic import ValidationError

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from hosting.app_settings import BotSettings  # noqa: E402

APP_PACKAGE = REPO_ROOT / "appPackage"
SCHEMA_PATH = APP_PACKAGE / "schema" / "teams-manifest-v1.22.schema.json"
LOCALIZATION_SCHEMA_PATH = APP_PACKAGE / "schema" / "teams-localization-v1.22.schema.json"
DEFAULT_OUT = REPO_ROOT / "dist" / "crag-teams-app.zip"

PLACEHOLDER = re.compile(r"\$\{\{([A-Za-z0-9_]+)\}\}")
PLACEHOLDERS = ("MICROSOFT_APP_ID", "TEAMS_APP_ID", "BOT_NAME", "PUBLIC_HOST", "APP_VERSION")
GUID = re.compile(r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
EXAMPLE_GUID = "00000000-0000-0000-0000-000000000000"
# Namespace of the Teams app ids derived from bot app ids (uuid5): never change it, or every
# derived id changes and Teams sees a new app.
TEAMS_APP_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:crag-teams-bot:teams-app")

# Limits Teams applies beyond the JSON schema (the schema allows 128 / 4000 for commands).
COMMAND_TITLE_MAX = 32
COMMAND_DESCRIPTION_MAX = 128
# The same limits for the strings of a language file, by key. The localization schema allows
# 128 / 4000 for commands, and its name and description limits sit next to a `$ref`, which draft-04
# ignores: only these checks hold a translation to what the manifest's own strings may be.
TEXT_LIMITS: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"name\.short"), 30),
    (re.compile(r"name\.full"), 100),
    (re.compile(r"description\.short"), 80),
    (re.compile(r"description\.full"), 4000),
    (re.compile(r"bots\[\d+\]\.commandLists\[\d+\]\.commands\[\d+\]\.title"), COMMAND_TITLE_MAX),
    (re.compile(r"bots\[\d+\]\.commandLists\[\d+\]\.commands\[\d+\]\.description"), COMMAND_DESCRIPTION_MAX),
)
# Keys of a language file that are not paths of manifest strings.
LOCALIZATION_META_KEYS = frozenset({"$schema", "localizationKeys"})
# One step of a manifest path in a localization key: `commandLists[1]`, `title`.
KEY_STEP = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[[0-9]+\])*)")
# A language file is a plain .json file at the package root: no folder, no leading dot.
LANGUAGE_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.json")
ICON_SIZES = {"color": (192, 192), "outline": (32, 32)}
PACKAGE_FILES = ("manifest.json", "color.png", "outline.png")
# Fixed timestamp: the same inputs give a byte-identical zip.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class PackageError(Exception):
    """One or more problems that stop the build; each is a line for the user."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


def project_version(pyproject: Path = REPO_ROOT / "pyproject.toml") -> str:
    with pyproject.open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def derived_teams_app_id(app_id: str) -> str:
    return str(uuid.uuid5(TEAMS_APP_NAMESPACE, app_id.strip().lower()))


def public_host(url: str) -> str:
    """`https://bot.example.com:8443/x` → `bot.example.com:8443` (no scheme, path or credentials)."""
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    return f"{host}:{parts.port}" if host and parts.port and parts.port != 443 else host


def placeholder_values(settings: BotSettings) -> dict[str, str]:
    """The values of the manifest placeholders, or a PackageError naming every bad setting."""
    problems: list[str] = []
    app_id = settings.app_id.strip()
    if not app_id:
        problems.append(
            "MicrosoftAppId is not set: the Teams package needs the bot's Azure app id, a GUID such as "
            f"{EXAMPLE_GUID} (Azure Bot resource → Configuration → Microsoft App ID)."
        )
    elif not GUID.match(app_id):
        problems.append(
            f"MicrosoftAppId {app_id!r} is not a GUID: expected 8-4-4-4-12 hexadecimal digits such as "
            f"{EXAMPLE_GUID} (Azure Bot resource → Configuration → Microsoft App ID)."
        )

    teams_app_id = settings.teams_app_id.strip()
    if teams_app_id and not GUID.match(teams_app_id):
        problems.append(f"TEAMS_APP_ID {teams_app_id!r} is not a GUID (leave it empty to derive one).")

    url = settings.public_base_url.strip()
    host = public_host(url) if url else ""
    if not url:
        problems.append(
            "PUBLIC_BASE_URL is not set: the Teams package needs the bot's public https address, "
            "e.g. https://crag-bot.azurewebsites.net (its host goes into validDomains)."
        )
    elif urlsplit(url).scheme.lower() != "https" or not host:
        problems.append(
            f"PUBLIC_BASE_URL {url!r} is not an https URL with a host: Teams reaches bots and links only "
            "over https, e.g. https://crag-bot.azurewebsites.net."
        )

    name = settings.bot_name.strip()
    if not name:
        problems.append("BOT_NAME is empty: it is the app's name in Teams (at most 30 characters).")

    version = settings.teams_app_version.strip() or project_version()
    if not VERSION.match(version):
        problems.append(f"app version {version!r} is not of the form X.Y.Z (TEAMS_APP_VERSION).")

    if problems:
        raise PackageError(problems)
    # GUIDs are case-insensitive; Azure shows them in lower case.
    return {
        "MICROSOFT_APP_ID": app_id.lower(),
        "TEAMS_APP_ID": (teams_app_id or derived_teams_app_id(app_id)).lower(),
        "BOT_NAME": name,
        "PUBLIC_HOST": host,
        "APP_VERSION": version,
    }


def placeholders_in(value: Any) -> set[str]:
    """Names of the `${{NAME}}` placeholders anywhere in a JSON value (keys included)."""
    return set(PLACEHOLDER.findall(json.dumps(value, ensure_ascii=False)))


def fill(value: Any, values: Mapping[str, str]) -> Any:
    """Replace the placeholders in every string of a JSON value (no JSON escaping issues)."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: values[m.group(1)], value)
    if isinstance(value, list):
        return [fill(item, values) for item in value]
    if isinstance(value, dict):
        return {fill(key, values): fill(item, values) for key, item in value.items()}
    return value


def build_manifest(template: Any, values: Mapping[str, str]) -> dict[str, Any]:
    unknown = placeholders_in(template) - set(values)
    if unknown:
        raise PackageError(
            f"manifest template: unknown placeholder ${{{{{name}}}}}" for name in sorted(unknown)
        )
    manifest = fill(template, values)
    if not isinstance(manifest, dict):
        raise PackageError(["manifest template: not a JSON object"])
    return manifest


def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return schema


def schema_errors(manifest: Any, schema: Mapping[str, Any]) -> list[jsonschema.ValidationError]:
    """Every schema violation, with the draft named by the schema's `$schema` (draft-04 for Teams)."""
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    return sorted(validator.iter_errors(manifest), key=lambda e: (list(map(str, e.absolute_path)), e.message))


def describe(error: jsonschema.ValidationError) -> str:
    message = f"{error.json_path}: {error.message}"
    # anyOf / oneOf: say why each alternative failed.
    for sub in error.context or ():
        message += f"\n    - {sub.json_path}: {sub.message}"
    return message


def teams_limits(manifest: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Rules Teams enforces that the draft-04 schema does not (`const` is not a draft-04 keyword)."""
    problems: list[str] = []
    wanted = schema.get("properties", {}).get("manifestVersion", {}).get("const")
    if wanted and manifest.get("manifestVersion") != wanted:
        problems.append(f"$.manifestVersion: {manifest.get('manifestVersion')!r} is not {wanted!r}")
    for b, bot in enumerate(manifest.get("bots") or []):
        for c, command_list in enumerate(bot.get("commandLists") or []):
            for i, command in enumerate(command_list.get("commands") or []):
                where = f"$.bots[{b}].commandLists[{c}].commands[{i}]"
                title, description = str(command.get("title", "")), str(command.get("description", ""))
                if len(title) > COMMAND_TITLE_MAX:
                    problems.append(f"{where}.title: {title!r} is longer than {COMMAND_TITLE_MAX} characters")
                if len(description) > COMMAND_DESCRIPTION_MAX:
                    problems.append(
                        f"{where}.description: {len(description)} characters, "
                        f"more than {COMMAND_DESCRIPTION_MAX}"
                    )
    icons = manifest.get("icons") or {}
    for kind in ICON_SIZES:
        if icons.get(kind) != f"{kind}.png":
            problems.append(f"$.icons.{kind}: must be {kind}.png (the file at the package root)")
    return problems


def validate_manifest(manifest: Any, schema: Mapping[str, Any]) -> list[str]:
    problems = [describe(error) for error in schema_errors(manifest, schema)]
    if isinstance(manifest, dict):
        problems += teams_limits(manifest, schema)
        problems += language_entries(manifest)[1]
    left = placeholders_in(manifest)
    if left:
        problems.append("placeholders left unfilled: " + ", ".join(sorted(left)))
    return problems


def language_entries(manifest: Mapping[str, Any]) -> tuple[list[tuple[str, str]], list[str]]:
    """The (language tag, file) of each additional language whose file can be packaged, and the
    problems of the others. Malformed entries are left to the schema."""
    info = manifest.get("localizationInfo")
    if not isinstance(info, dict):
        return [], []
    problems: list[str] = []
    if "defaultLanguageFile" in info:
        problems.append(
            "$.localizationInfo.defaultLanguageFile: not supported by this build; keep the default "
            "language's strings in manifest.json"
        )
    default = str(info.get("defaultLanguageTag", "")).lower()
    entries: list[tuple[str, str]] = []
    tags: set[str] = set()
    files: set[str] = set()
    for n, entry in enumerate(info.get("additionalLanguages") or []):
        if not isinstance(entry, dict):
            continue
        tag, name = entry.get("languageTag"), entry.get("file")
        if not isinstance(tag, str) or not isinstance(name, str):
            continue
        where = f"$.localizationInfo.additionalLanguages[{n}]"
        if tag.lower() == default:
            problems.append(f"{where}.languageTag: {tag!r} is the default language (defaultLanguageTag)")
        elif tag.lower() in tags:
            problems.append(f"{where}.languageTag: {tag!r} is listed twice")
        tags.add(tag.lower())
        if not LANGUAGE_FILE.fullmatch(name) or name.lower() in PACKAGE_FILES:
            problems.append(
                f"{where}.file: {name!r} must be a plain .json file at the package root, "
                "such as ja-jp.json (no folder, not manifest.json)"
            )
        elif name.lower() in files:
            problems.append(f"{where}.file: {name!r} is listed twice")
        else:
            files.add(name.lower())
            entries.append((tag, name))
    return entries, problems


def manifest_path(key: str) -> list[str | int] | None:
    """`bots[0].commandLists[1].commands[2].title` → ['bots', 0, 'commandLists', 1, 'commands', 2,
    'title'], or None if the key is not of that form."""
    path: list[str | int] = []
    for step in key.split("."):
        match = KEY_STEP.fullmatch(step)
        if not match:
            return None
        path.append(match.group(1))
        path += [int(index) for index in re.findall(r"[0-9]+", match.group(2))]
    return path


def names_a_string(manifest: Any, path: Iterable[str | int]) -> bool:
    node = manifest
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return False
        elif not isinstance(node, dict) or step not in node:
            return False
        node = node[step]
    return isinstance(node, str)


def text_limit(key: str) -> int | None:
    return next((limit for pattern, limit in TEXT_LIMITS if pattern.fullmatch(key)), None)


def allowed_key(key: str, schema: Mapping[str, Any]) -> bool:
    """Whether the localization schema has the key (its `properties` or `patternProperties`)."""
    return key in schema.get("properties", {}) or any(
        re.search(pattern, key) for pattern in schema.get("patternProperties", {})
    )


def validate_language_file(
    name: str, strings: Any, manifest: Mapping[str, Any], schema: Mapping[str, Any]
) -> list[str]:
    """The localization schema, plus what Teams checks beyond it: each key names a string of the
    manifest, and a translation keeps to the limits of the string it replaces."""
    if not isinstance(strings, dict):
        return [f"{name}: not a JSON object"]
    problems: list[str] = []
    rejected: set[str] = set()  # keys the schema already reported
    for error in schema_errors(strings, schema):
        if error.validator == "additionalProperties" and not error.absolute_path:
            # jsonschema lists every allowed pattern; name the keys instead.
            for key in sorted(k for k in strings if not allowed_key(k, schema)):
                problems.append(f"{name}: {key!r} is not a key the Teams localization schema allows")
                rejected.add(key)
            continue
        problems.append(f"{name}: {describe(error)}")
        if error.absolute_path:
            rejected.add(str(error.absolute_path[0]))
    for key, value in strings.items():
        if key in LOCALIZATION_META_KEYS or key in rejected:
            continue
        path = manifest_path(key)
        if path is None or not names_a_string(manifest, path):
            problems.append(
                f"{name}: {key!r} names no string of the manifest (each key is the path of one, "
                "such as bots[0].commandLists[0].commands[0].title)"
            )
            continue
        limit = text_limit(key)
        if limit is not None and isinstance(value, str) and len(value) > limit:
            problems.append(f"{name}: {key!r}: {value!r} is {len(value)} characters, more than {limit}")
    left = placeholders_in(strings)
    if left:
        problems.append(f"{name}: placeholders left unfilled: " + ", ".join(sorted(left)))
    return problems


def build_language_file(
    app_dir: Path,
    name: str,
    values: Mapping[str, str],
    manifest: Mapping[str, Any],
    schema: Mapping[str, Any],
) -> tuple[dict[str, Any] | None, list[str]]:
    """Read a language file of the app dir, fill its placeholders and validate it: (the strings or
    None, the problems)."""
    path = app_dir / name
    try:
        template = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return None, [f"{name}: missing in {app_dir} (named by localizationInfo.additionalLanguages)"]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"{name}: cannot be read ({exc})"]
    except json.JSONDecodeError as exc:
        return None, [f"{name}: not valid JSON ({exc})"]
    unknown = placeholders_in(template) - set(values)
    if unknown:
        return None, [f"{name}: unknown placeholder ${{{{{key}}}}}" for key in sorted(unknown)]
    strings = fill(template, values)
    problems = validate_language_file(name, strings, manifest, schema)
    return (strings if isinstance(strings, dict) else None), problems


def package_files(manifest: Mapping[str, Any]) -> list[str]:
    """The names in the zip, in order: manifest, icons, language files."""
    return [*PACKAGE_FILES, *(name for _, name in language_entries(manifest)[0])]


def icon_problems(kind: str, data: bytes) -> list[str]:
    """Size and format of an icon; the outline icon must be white on a fully transparent background."""
    name = f"{kind}.png"
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as exc:  # any decoding failure means an unusable icon
        return [f"{name}: not a readable image ({exc})"]
    problems: list[str] = []
    if image.format != "PNG":
        problems.append(f"{name}: is {image.format}, not PNG")
    if image.size != ICON_SIZES[kind]:
        want = "×".join(map(str, ICON_SIZES[kind]))
        problems.append(f"{name}: is {image.width}×{image.height}, must be {want}")
    if kind == "outline":
        if "A" not in image.getbands() and "transparency" not in image.info:
            problems.append(f"{name}: has no alpha channel; it must be white on a transparent background")
        else:
            rgba = image.convert("RGBA")
            data = rgba.tobytes()
            pixels = [data[i : i + 4] for i in range(0, len(data), 4)]
            coloured = sum(1 for px in pixels if px[3] and px[:3] != b"\xff\xff\xff")
            visible = sum(1 for px in pixels if px[3])
            if coloured:
                problems.append(
                    f"{name}: {coloured} visible pixels are not white (only white and transparent)"
                )
            if not visible:
                problems.append(f"{name}: is fully transparent")
            elif visible == len(pixels):
                problems.append(f"{name}: has no transparent background")
    return problems


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    return (json.dumps(manifest, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def write_zip(out: Path, files: Mapping[str, bytes]) -> None:
    """Write the files at the zip's root (no folders), atomically, with fixed timestamps."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    tmp.replace(out)


def build(
    settings: BotSettings,
    out: Path,
    app_dir: Path = APP_PACKAGE,
    schema_path: Path = SCHEMA_PATH,
    localization_schema_path: Path = LOCALIZATION_SCHEMA_PATH,
) -> dict[str, Any]:
    """Fill, validate and zip; return the manifest written. Raises PackageError listing every problem."""
    values = placeholder_values(settings)
    template = json.loads((app_dir / "manifest.json").read_text("utf-8"))
    manifest = build_manifest(template, values)
    problems = validate_manifest(manifest, load_schema(schema_path))
    languages: dict[str, bytes] = {}
    entries = language_entries(manifest)[0]
    if entries:
        localization_schema = load_schema(localization_schema_path)
        for _tag, name in entries:
            strings, found = build_language_file(app_dir, name, values, manifest, localization_schema)
            problems += found
            if strings is not None:
                languages[name] = manifest_bytes(strings)
    icons: dict[str, bytes] = {}
    for kind in ICON_SIZES:
        path = app_dir / f"{kind}.png"
        if not path.is_file():
            problems.append(f"{kind}.png: missing in {app_dir} (python tools/make_teams_icons.py draws it)")
            continue
        icons[f"{kind}.png"] = path.read_bytes()
        problems += icon_problems(kind, icons[f"{kind}.png"])
    if problems:
        raise PackageError(problems)
    write_zip(out, {"manifest.json": manifest_bytes(manifest), **icons, **languages})
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="zip to write (default: %(default)s)")
    parser.add_argument("--env-file", type=Path, default=Path(".env"), help="dotenv file (default: ./.env)")
    parser.add_argument("--app-dir", type=Path, default=APP_PACKAGE, help="manifest template and icons")
    parser.add_argument("--schema", type=Path, default=SCHEMA_PATH, help="Teams manifest JSON schema")
    parser.add_argument(
        "--localization-schema",
        type=Path,
        default=LOCALIZATION_SCHEMA_PATH,
        help="Teams localization JSON schema (for the language files)",
    )
    args = parser.parse_args(argv)
    try:
        settings = BotSettings(_env_file=args.env_file)  # type: ignore[call-arg]
    except ValidationError as exc:
        print(f"error: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    try:
        manifest = build(settings, args.out, args.app_dir, args.schema, args.localization_schema)
    except PackageError as exc:
        count = len(exc.problems)
        print(
            f"error: cannot build the Teams app package ({count} problem{'s' * (count != 1)}):",
            file=sys.stderr,
        )
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    bot = manifest["bots"][0]
    print(
        f"wrote {args.out}: {', '.join(package_files(manifest))}\n"
        f"  Teams app id {manifest['id']}, version {manifest['version']}, bot {bot['botId']}, "
        f"name {manifest['name']['short']!r}, valid domains {', '.join(manifest['validDomains'])}\n"
        "  Upload it in Teams (Apps → Manage your apps → Upload an app → Upload a custom app) "
        "or in the Teams admin center (Teams apps → Manage apps → Upload new app)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
