"""The Teams app package: manifest template, icons and the zip built by tools/build_teams_package.py."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
from PIL import Image

from dialogs.commands import Command, classify
from tests.paths import ROOT

APP_PACKAGE = ROOT / "appPackage"
SCHEMA = APP_PACKAGE / "schema" / "teams-manifest-v1.22.schema.json"
LOCALIZATION_SCHEMA = APP_PACKAGE / "schema" / "teams-localization-v1.22.schema.json"
# sha256 of build/json-schemas/teams/v1.22/MicrosoftTeams.Localization.schema.json in the npm package
# @microsoft/app-manifest 1.1.2 (appPackage/README.md): the copy is unchanged.
LOCALIZATION_SCHEMA_SHA256 = "a23209724d8809fddffa8d200d2d74d508b543d155ab62428c0d5386f1df7768"
BUILD_SCRIPT = ROOT / "tools" / "build_teams_package.py"
ICON_SCRIPT = ROOT / "tools" / "make_teams_icons.py"

APP_ID = "5f0c2b9e-8d1a-4c3b-9e7f-0a1b2c3d4e5f"
SETTINGS_ENV = ("MicrosoftAppId", "PUBLIC_BASE_URL", "BOT_NAME", "TEAMS_APP_ID", "TEAMS_APP_VERSION")
PLACEHOLDER = re.compile(r"\$\{\{[A-Za-z0-9_]+\}\}")
JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")  # kana and kanji


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pkg() -> ModuleType:
    return _load(BUILD_SCRIPT)


@pytest.fixture(scope="module")
def icons() -> ModuleType:
    return _load(ICON_SCRIPT)


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA.read_text("utf-8"))
    return loaded


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((APP_PACKAGE / "manifest.json").read_text("utf-8"))
    return loaded


@pytest.fixture(scope="module")
def localization_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(LOCALIZATION_SCHEMA.read_text("utf-8"))
    return loaded


@pytest.fixture(scope="module")
def japanese() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((APP_PACKAGE / "ja-jp.json").read_text("utf-8"))
    return loaded


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No package setting from the caller's environment leaks into a test."""
    for name in SETTINGS_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _env_file(tmp_path: Path, **values: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "test.env"
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()), "utf-8")
    return path


def _build(pkg: ModuleType, tmp_path: Path, **values: str) -> tuple[int, Path]:
    out = tmp_path / "dist" / "crag-teams-app.zip"
    code = pkg.main(["--out", str(out), "--env-file", str(_env_file(tmp_path, **values))])
    return code, out


def _build_app(pkg: ModuleType, tmp_path: Path, app_dir: Path) -> tuple[int, Path]:
    """Build from another app dir with good settings."""
    out = tmp_path / "dist" / "crag-teams-app.zip"
    env_file = _env_file(tmp_path, **GOOD)
    code = pkg.main(["--out", str(out), "--env-file", str(env_file), "--app-dir", str(app_dir)])
    return code, out


def _app_copy(tmp_path: Path) -> Path:
    """The app package (manifest template, icons, language file) in a folder a test may change."""
    app_dir = tmp_path / "appPackage"
    app_dir.mkdir(parents=True)
    for name in ("manifest.json", "color.png", "outline.png", "ja-jp.json"):
        shutil.copyfile(APP_PACKAGE / name, app_dir / name)
    return app_dir


def _validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _manifest_in(zip_path: Path, name: str = "manifest.json") -> dict[str, Any]:
    with zipfile.ZipFile(zip_path) as archive:
        loaded: dict[str, Any] = json.loads(archive.read(name).decode("utf-8"))
        return loaded


def _command_keys(template: dict[str, Any]) -> list[str]:
    """The localization key of every command title and description of the manifest."""
    return [
        f"bots[0].commandLists[{c}].commands[{i}].{field}"
        for c, entry in enumerate(template["bots"][0]["commandLists"])
        for i in range(len(entry["commands"]))
        for field in ("title", "description")
    ]


GOOD = {
    "MicrosoftAppId": APP_ID,
    "PUBLIC_BASE_URL": "https://crag-bot.example.com/",
    "BOT_NAME": "CRAG Assistant",
}


# --- schema and template ------------------------------------------------------------------------------


def test_schema_is_draft4_and_the_shared_copy(schema: dict[str, Any]) -> None:
    assert jsonschema.validators.validator_for(schema) is jsonschema.Draft4Validator
    assert schema["additionalProperties"] is False


def test_template_is_valid_but_for_its_placeholders(template: dict[str, Any], schema: dict[str, Any]) -> None:
    assert template["manifestVersion"] == "1.22"
    errors = list(_validator(schema).iter_errors(template))
    # The only violations: GUID fields that hold a placeholder until the build fills them.
    for error in errors:
        assert isinstance(error.instance, str) and PLACEHOLDER.fullmatch(error.instance), error
        assert error.validator == "pattern", error
    assert {tuple(e.absolute_path) for e in errors} == {("id",), ("bots", 0, "botId")}
    placeholders = set(PLACEHOLDER.findall(json.dumps(template)))
    assert placeholders == {
        "${{MICROSOFT_APP_ID}}",
        "${{TEAMS_APP_ID}}",
        "${{BOT_NAME}}",
        "${{PUBLIC_HOST}}",
        "${{APP_VERSION}}",
    }


def test_template_with_example_values_is_valid(
    pkg: ModuleType, template: dict[str, Any], schema: Any
) -> None:
    values = {
        "MICROSOFT_APP_ID": APP_ID,
        "TEAMS_APP_ID": "0f6a4c1e-2b3d-4e5f-8a9b-1c2d3e4f5a6b",
        "BOT_NAME": "CRAG Assistant",
        "PUBLIC_HOST": "crag-bot.example.com",
        "APP_VERSION": "0.1.0",
    }
    manifest = pkg.build_manifest(template, values)
    _validator(schema).validate(manifest)
    assert pkg.validate_manifest(manifest, schema) == []


def test_bot_scopes_and_commands(template: dict[str, Any]) -> None:
    assert "packageName" not in template
    (bot,) = template["bots"]
    assert bot["botId"] == "${{MICROSOFT_APP_ID}}"
    assert bot["scopes"] == ["personal", "team", "groupChat"]
    assert bot["supportsFiles"] is False
    lists = bot["commandLists"]
    assert sorted(scope for entry in lists for scope in entry["scopes"]) == sorted(bot["scopes"])
    for entry in lists:
        assert len(entry["scopes"]) == 1
        titles = [command["title"] for command in entry["commands"]]
        assert titles[:2] == ["help", "reset"]
        assert "How much paid leave do I get?" in titles  # answered from sample_docs/leave_policy.md
        assert any("VPN" in title for title in titles)
        for command in entry["commands"]:
            assert 0 < len(command["title"]) <= 32, command
            assert 0 < len(command["description"]) <= 128, command
    assert len(template["description"]["short"]) <= 80
    assert re.fullmatch(r"#[0-9A-Fa-f]{6}", template["accentColor"])
    assert template["icons"] == {"color": "color.png", "outline": "outline.png"}
    assert template["validDomains"] == ["${{PUBLIC_HOST}}"]


def test_the_manifest_speaks_english_and_names_the_japanese_file(template: dict[str, Any]) -> None:
    assert template["localizationInfo"] == {
        "defaultLanguageTag": "en-us",
        "additionalLanguages": [{"languageTag": "ja-jp", "file": "ja-jp.json"}],
    }
    english = [
        template["name"]["short"],
        template["name"]["full"],
        template["description"]["short"],
        template["description"]["full"],
        *(
            command[field]
            for entry in template["bots"][0]["commandLists"]
            for command in entry["commands"]
            for field in ("title", "description")
        ),
    ]
    assert [text for text in english if JAPANESE.search(text) or " / " in text] == []


def test_command_limits_are_enforced(pkg: ModuleType, template: dict[str, Any], schema: Any) -> None:
    manifest = json.loads(json.dumps(template))
    manifest["bots"][0]["commandLists"][0]["commands"][0]["title"] = "x" * 33
    manifest["bots"][0]["commandLists"][1]["commands"][1]["description"] = "y" * 129
    problems = pkg.teams_limits(manifest, schema)
    assert any("commandLists[0].commands[0].title" in p for p in problems)
    assert any("commandLists[1].commands[1].description" in p for p in problems)


# --- the Japanese language file ---------------------------------------------------------------------


def test_localization_schema_is_draft4_and_the_npm_copy(localization_schema: dict[str, Any]) -> None:
    assert hashlib.sha256(LOCALIZATION_SCHEMA.read_bytes()).hexdigest() == LOCALIZATION_SCHEMA_SHA256
    assert jsonschema.validators.validator_for(localization_schema) is jsonschema.Draft4Validator
    assert localization_schema["additionalProperties"] is False


def test_japanese_file_covers_every_command_of_every_list(
    template: dict[str, Any], japanese: dict[str, Any]
) -> None:
    """A Japanese user sees no English: every string the manifest shows has a Japanese translation."""
    expected = {"name.short", "name.full", "description.short", "description.full", *_command_keys(template)}
    assert set(japanese) - {"$schema"} == expected
    assert japanese["name.short"] == template["name"]["short"] == "${{BOT_NAME}}"
    untranslated = [key for key in expected - {"name.short"} if not JAPANESE.search(japanese[key])]
    assert untranslated == []


def test_japanese_commands_are_what_the_bot_understands(
    template: dict[str, Any], japanese: dict[str, Any]
) -> None:
    for c, entry in enumerate(template["bots"][0]["commandLists"]):
        titles = [japanese[f"bots[0].commandLists[{c}].commands[{i}].title"] for i in range(4)]
        english = [command["title"] for command in entry["commands"]]
        # A click on a command sends its title: help and reset must stay commands in both languages.
        for title in (titles[0], english[0]):
            assert classify(title, 500) is Command.HELP, title
        for title in (titles[1], english[1]):
            assert classify(title, 500) is Command.RESET, title
        assert titles[2] == "有給休暇は何日？"
        assert "VPN" in titles[3]
        for title in titles[2:] + english[2:]:
            assert classify(title, 500) is Command.QUESTION, title


def test_japanese_file_is_valid_once_filled(
    pkg: ModuleType, template: dict[str, Any], japanese: dict[str, Any], localization_schema: Any
) -> None:
    values = {
        "MICROSOFT_APP_ID": APP_ID,
        "TEAMS_APP_ID": "0f6a4c1e-2b3d-4e5f-8a9b-1c2d3e4f5a6b",
        "BOT_NAME": "A" * 30,  # the longest name the manifest allows
        "PUBLIC_HOST": "crag-bot.example.com",
        "APP_VERSION": "0.1.0",
    }
    manifest = pkg.build_manifest(template, values)
    strings = pkg.fill(japanese, values)
    _validator(localization_schema).validate(strings)
    assert pkg.validate_language_file("ja-jp.json", strings, manifest, localization_schema) == []


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "bots[0].commandLists[1].commands[4].title",
            "存在しないコマンド",
            "'bots[0].commandLists[1].commands[4].title' names no string of the manifest",
        ),
        ("staticTabs[0].name", "タブ", "'staticTabs[0].name' names no string of the manifest"),
        ("name.short2", "x", "not a key the Teams localization schema allows"),
        ("bots[0].commandLists[3].commands[0].title", "x", "not a key the Teams localization schema allows"),
        ("bots[0].commandLists[0].commands[2].title", "有" * 33, "33 characters, more than 32"),
        ("bots[0].commandLists[2].commands[3].description", "説" * 129, "129 characters, more than 128"),
        ("name.short", "名" * 31, "'name.short': " + repr("名" * 31) + " is 31 characters, more than 30"),
        ("description.short", "説" * 81, "81 characters, more than 80"),
        ("description.full", "", "$['description.full']"),
        ("name.full", "${{NOPE}}", "ja-jp.json: unknown placeholder ${{NOPE}}"),
    ],
)
def test_bad_japanese_strings_stop_the_build(
    pkg: ModuleType,
    tmp_path: Path,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
    value: str,
    message: str,
) -> None:
    app_dir = _app_copy(tmp_path)
    path = app_dir / "ja-jp.json"
    strings = json.loads(path.read_text("utf-8"))
    strings[key] = value
    path.write_text(json.dumps(strings, ensure_ascii=False), "utf-8")
    code, out = _build_app(pkg, tmp_path, app_dir)
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "ja-jp.json" in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "ja-jp.json: missing in"),
        (b"{not json", "ja-jp.json: not valid JSON"),
        (b"\xff\xfe{}", "ja-jp.json: cannot be read"),
        (b"[]", "ja-jp.json: not a JSON object"),
    ],
)
def test_missing_or_unreadable_language_file_exits_2(
    pkg: ModuleType,
    tmp_path: Path,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
    message: str,
) -> None:
    app_dir = _app_copy(tmp_path)
    (app_dir / "ja-jp.json").unlink()
    if content is not None:
        (app_dir / "ja-jp.json").write_bytes(content)
    (app_dir / "color.png").unlink()  # every problem is listed, not only the first
    code, out = _build_app(pkg, tmp_path, app_dir)
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "color.png: missing" in err, err
    assert not out.exists()


NOT_AT_ROOT = "must be a plain .json file at the package root"


@pytest.mark.parametrize(
    ("tag", "file", "message", "packaged"),
    [
        ("ja-jp", "../ja-jp.json", NOT_AT_ROOT, False),
        ("ja-jp", "lang/ja-jp.json", NOT_AT_ROOT, False),
        ("ja-jp", "ja-jp.txt", NOT_AT_ROOT, False),
        ("ja-jp", "Manifest.json", NOT_AT_ROOT, False),
        ("en-US", "en-us.json", "'en-US' is the default language", True),
    ],
)
def test_language_entries_must_be_packageable(
    pkg: ModuleType,
    template: dict[str, Any],
    schema: Any,
    tag: str,
    file: str,
    message: str,
    packaged: bool,
) -> None:
    manifest = json.loads(json.dumps(template))
    manifest["localizationInfo"]["additionalLanguages"] = [{"languageTag": tag, "file": file}]
    problems = pkg.validate_manifest(manifest, schema)
    assert any(p.startswith("$.localizationInfo.additionalLanguages[0]") and message in p for p in problems)
    # A file that cannot be at the root is never read or zipped.
    assert pkg.language_entries(manifest)[0] == ([(tag, file)] if packaged else [])


def test_the_same_language_twice_is_reported(pkg: ModuleType, template: dict[str, Any], schema: Any) -> None:
    manifest = json.loads(json.dumps(template))
    manifest["localizationInfo"]["additionalLanguages"] = [
        {"languageTag": "ja-jp", "file": "ja-jp.json"},
        {"languageTag": "JA-JP", "file": "ja.json"},
        {"languageTag": "fr-fr", "file": "ja-jp.json"},
    ]
    problems = "\n".join(pkg.validate_manifest(manifest, schema))
    assert "additionalLanguages[1].languageTag: 'JA-JP' is listed twice" in problems
    assert "additionalLanguages[2].file: 'ja-jp.json' is listed twice" in problems


# --- icons --------------------------------------------------------------------------------------------


def test_color_icon_is_192_full_colour() -> None:
    with Image.open(APP_PACKAGE / "color.png") as image:
        assert image.format == "PNG"
        assert image.size == (192, 192)
        data = image.convert("RGBA").tobytes()
    pixels = {data[i : i + 4] for i in range(0, len(data), 4)}
    centre = (96 * 192 + 96) * 4
    assert data[centre + 3] == 255  # the glyph's centre is opaque
    opaque = [px for px in pixels if px[3] == 255]
    assert any(max(px[:3]) - min(px[:3]) > 60 for px in opaque)  # colour, not a grey image
    assert b"\xff\xff\xff\xff" in opaque  # the white glyph


def test_outline_icon_is_32_white_on_transparent() -> None:
    with Image.open(APP_PACKAGE / "outline.png") as image:
        assert image.format == "PNG"
        assert image.size == (32, 32)
        assert "A" in image.getbands()
        data = image.convert("RGBA").tobytes()
    pixels = [data[i : i + 4] for i in range(0, len(data), 4)]
    visible = [px for px in pixels if px[3]]
    assert all(px[:3] == b"\xff\xff\xff" for px in visible)
    assert 0 < len(visible) < len(pixels) // 2  # a glyph, mostly transparent background
    assert data[3] == 0  # top-left corner fully transparent


def test_icon_check_rejects_bad_outlines(pkg: ModuleType) -> None:
    def png(image: Image.Image) -> bytes:
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()

    good = Image.new("RGBA", (32, 32), (255, 255, 255, 0))
    good.putpixel((5, 5), (255, 255, 255, 200))
    assert pkg.icon_problems("outline", png(good)) == []
    coloured = good.copy()
    coloured.putpixel((6, 6), (0, 120, 212, 255))
    assert any("not white" in p for p in pkg.icon_problems("outline", png(coloured)))
    assert any(
        "no alpha" in p for p in pkg.icon_problems("outline", png(Image.new("RGB", (32, 32), "white")))
    )
    assert any("32×32" in p for p in pkg.icon_problems("outline", png(good.resize((48, 48)))))
    assert any("192×192" in p for p in pkg.icon_problems("color", png(Image.new("RGB", (96, 96), "blue"))))
    assert any("not a readable image" in p for p in pkg.icon_problems("color", b"not a png"))


def test_icons_are_what_the_script_draws(icons: ModuleType, tmp_path: Path) -> None:
    assert icons.main(["--out-dir", str(tmp_path)]) == 0
    for name in ("color.png", "outline.png"):
        with Image.open(tmp_path / name) as drawn, Image.open(APP_PACKAGE / name) as committed:
            assert drawn.size == committed.size
            assert drawn.convert("RGBA").tobytes() == committed.convert("RGBA").tobytes(), name


# --- the build ----------------------------------------------------------------------------------------


def test_build_writes_the_manifest_icons_and_language_file_at_the_root(
    pkg: ModuleType,
    schema: Any,
    localization_schema: Any,
    tmp_path: Path,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _build(pkg, tmp_path, **GOOD)
    assert code == 0
    assert "manifest.json, color.png, outline.png, ja-jp.json" in capsys.readouterr().out
    with zipfile.ZipFile(out) as archive:
        assert archive.testzip() is None
        assert archive.namelist() == ["manifest.json", "color.png", "outline.png", "ja-jp.json"]
        assert all(not info.is_dir() and "/" not in info.filename for info in archive.infolist())
        raw = archive.read("manifest.json")
        raw_ja = archive.read("ja-jp.json")
        assert archive.read("color.png") == (APP_PACKAGE / "color.png").read_bytes()
        assert archive.read("outline.png") == (APP_PACKAGE / "outline.png").read_bytes()
    for data in (raw, raw_ja):
        assert not data.startswith(b"\xef\xbb\xbf")  # no BOM
        text = data.decode("utf-8")
        assert "${{" not in text and not PLACEHOLDER.search(text)
    manifest = json.loads(raw)
    _validator(schema).validate(manifest)
    japanese = json.loads(raw_ja)
    _validator(localization_schema).validate(japanese)
    assert japanese["name.short"] == "CRAG Assistant"
    assert japanese["name.full"].startswith("CRAG Assistant")
    assert japanese["bots[0].commandLists[0].commands[2].title"] == "有給休暇は何日？"

    assert manifest["bots"][0]["botId"] == APP_ID
    assert manifest["id"] == pkg.derived_teams_app_id(APP_ID) != APP_ID
    assert re.fullmatch(r"[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}", manifest["id"])
    assert manifest["name"]["short"] == "CRAG Assistant"
    assert manifest["name"]["full"].startswith("CRAG Assistant")
    assert manifest["validDomains"] == ["crag-bot.example.com"]
    assert manifest["version"] == pkg.project_version() == "0.1.0"


def test_build_is_stable(pkg: ModuleType, tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    code1, out1 = _build(pkg, tmp_path / "a", **GOOD)
    code2, out2 = _build(pkg, tmp_path / "b", **{**GOOD, "MicrosoftAppId": APP_ID.upper()})
    assert code1 == code2 == 0
    # Same bot → same Teams app id (and the same bytes): a new build updates the uploaded app.
    assert out1.read_bytes() == out2.read_bytes()


def test_build_overrides_from_environment(
    pkg: ModuleType, tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    teams_id = "0F6A4C1E-2B3D-4E5F-8A9B-1C2D3E4F5A6B"
    clean_env.setenv("TEAMS_APP_ID", teams_id)
    clean_env.setenv("TEAMS_APP_VERSION", "1.4.2")
    clean_env.setenv("BOT_NAME", '社内ナレッジ "Bot"')
    code, out = _build(pkg, tmp_path, **{**GOOD, "PUBLIC_BASE_URL": "https://Bot.Example.com:8443/teams"})
    assert code == 0
    manifest = _manifest_in(out)
    assert manifest["id"] == teams_id.lower()
    assert manifest["version"] == "1.4.2"
    assert manifest["name"]["short"] == '社内ナレッジ "Bot"'  # JSON-escaped correctly
    assert _manifest_in(out, "ja-jp.json")["name.short"] == '社内ナレッジ "Bot"'
    assert manifest["validDomains"] == ["bot.example.com:8443"]


@pytest.mark.parametrize(
    ("app_id", "message"),
    [("", "MicrosoftAppId is not set"), ("my-bot-app", "MicrosoftAppId 'my-bot-app' is not a GUID")],
)
def test_missing_or_bad_app_id_exits_2(
    pkg: ModuleType,
    tmp_path: Path,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    app_id: str,
    message: str,
) -> None:
    code, out = _build(pkg, tmp_path, **{**GOOD, "MicrosoftAppId": app_id})
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "GUID" in err
    assert not out.exists()


def test_every_settings_problem_is_reported(
    pkg: ModuleType, tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _build(
        pkg,
        tmp_path,
        MicrosoftAppId="abc",
        PUBLIC_BASE_URL="http://localhost:3978",
        TEAMS_APP_ID="nope",
        TEAMS_APP_VERSION="1.0",
    )
    assert code == 2
    err = capsys.readouterr().err
    for expected in ("MicrosoftAppId 'abc'", "PUBLIC_BASE_URL", "TEAMS_APP_ID 'nope'", "'1.0'"):
        assert expected in err


def test_schema_errors_are_printed_and_exit_2(
    pkg: ModuleType, tmp_path: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _build(pkg, tmp_path, **{**GOOD, "BOT_NAME": "A bot name longer than thirty characters"})
    assert code == 2
    err = capsys.readouterr().err
    assert "$.name.short" in err and "too long" in err
    assert not out.exists()


def test_every_schema_error_is_listed(pkg: ModuleType, template: dict[str, Any], schema: Any) -> None:
    manifest = json.loads(json.dumps(template))
    manifest["packageName"] = "com.example.bot"
    manifest["bots"][0]["scopes"] = ["Personal"]
    manifest["accentColor"] = "blue"
    problems = "\n".join(pkg.validate_manifest(manifest, schema))
    for expected in ("packageName", "$.bots[0].scopes[0]", "$.accentColor", "$.id", "unfilled"):
        assert expected in problems


def test_command_line_exit_code(tmp_path: Path) -> None:
    """The real command: a clear error and status 2 without an app id, a zip with one."""
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_ENV}
    command = [sys.executable, str(BUILD_SCRIPT), "--out", str(tmp_path / "app.zip")]
    failed = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert failed.returncode == 2
    assert "MicrosoftAppId is not set" in failed.stderr
    env.update(GOOD)
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "manifest.json, color.png, outline.png, ja-jp.json" in done.stdout
    with zipfile.ZipFile(tmp_path / "app.zip") as archive:
        assert archive.namelist() == ["manifest.json", "color.png", "outline.png", "ja-jp.json"]
