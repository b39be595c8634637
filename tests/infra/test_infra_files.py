"""The deployment files agree with the code: infra/ (Bicep for azd), azure.yaml and the Microsoft 365
Agents Toolkit files (m365agents*.yml, env/).

No Azure and no network: the Bicep is read as text here (and parsed with pycep-parser, and compiled
with the Bicep CLI, when those are installed). What a deployment would find only at run time is
checked against the code itself: every environment variable the Container App sets is a setting the
bot reads (from the settings models), every key or connection string reaches it as a Key Vault
secret, the managed-identity app type is one botbuilder accepts, every manifest placeholder gets a
value, and the Teams app id the toolkit computes is the one tools/build_teams_package.py gives.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr

from hosting.app_settings import BotSettings
from tests.paths import ROOT

INFRA = ROOT / "infra"
MAIN = INFRA / "main.bicep"
PARAMETERS = INFRA / "main.parameters.json"
CONTAINER_APP = INFRA / "modules" / "containerapp.bicep"
TOOLKIT_FILES = (ROOT / "m365agents.yml", ROOT / "m365agents.local.yml")
BICEP_FILES = sorted(INFRA.rglob("*.bicep"))
# Read by a library rather than by the bot's settings: azure-identity's DefaultAzureCredential picks
# the user-assigned identity by it (checked against azure-identity itself below).
LIBRARY_SETTINGS = {"AZURE_CLIENT_ID"}


# ---- reading Bicep as text: strings, comments and nested brackets masked out ------------------


def _string_end(text: str, i: int) -> int:
    """Index after the Bicep string starting at text[i] ("'"), interpolations included."""
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "'":
            return i + 1
        elif text.startswith("${", i):
            i = _expression_end(text, i + 2, "}")
        else:
            i += 1
    raise ValueError("unterminated string")


def _expression_end(text: str, i: int, close: str) -> int:
    """Index after the bracket `close` that ends the expression starting at text[i]."""
    depth = 0
    while i < len(text):
        char = text[i]
        if char == "'":
            i = _string_end(text, i)
            continue
        if text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
            continue
        if char in "{[(":
            depth += 1
        elif char in "}])":
            if depth == 0:
                if char != close:
                    raise ValueError(f"unbalanced {char!r} at {i}")
                return i + 1
            depth -= 1
        i += 1
    raise ValueError(f"no closing {close!r}")


def object_body(text: str, after: str) -> str:
    """The text inside the braces of the object that follows `after` (its first occurrence)."""
    start = text.index(after) + len(after)
    brace = text.index("{", start)
    return text[brace + 1 : _expression_end(text, brace + 1, "}") - 1]


def top_level(text: str) -> str:
    """`text` with strings, comments and everything inside brackets blanked (newlines kept), so
    that what remains is the structure of one level."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "'" or text.startswith("//", i) or text[i] in "{[(":
            if text[i] == "'":
                end = _string_end(text, i)
            elif text[i] == "/":
                end = text.find("\n", i) if "\n" in text[i:] else len(text)
            else:
                end = _expression_end(text, i + 1, {"{": "}", "[": "]", "(": ")"}[text[i]])
            out.append("".join("\n" if c == "\n" else " " for c in text[i:end]))
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def object_keys(body: str) -> list[str]:
    return re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*:", top_level(body), re.M)


def bicep_params(text: str) -> dict[str, dict[str, bool]]:
    """Each `param` of a file: whether it has a default and whether it is @secure()."""
    params: dict[str, dict[str, bool]] = {}
    lines = text.splitlines()
    for n, line in enumerate(lines):
        match = re.match(r"param\s+(\w+)\s+\w+(\s*=)?", line)
        if not match:
            continue
        decorators = []
        for previous in reversed(lines[:n]):
            if not previous.startswith("@"):
                break
            decorators.append(previous)
        params[match.group(1)] = {
            "default": bool(match.group(2)),
            "secure": any(d.startswith("@secure()") for d in decorators),
        }
    return params


def bicep_outputs(text: str) -> set[str]:
    return set(re.findall(r"^output\s+(\w+)\s", text, re.M))


def module_calls(path: Path) -> list[tuple[str, Path, list[str]]]:
    """(symbolic name, file, keys of its params object) of each `module` in a Bicep file."""
    text = path.read_text("utf-8")
    calls = []
    for match in re.finditer(r"^module\s+(\w+)\s+'([^']+)'", text, re.M):
        body = object_body(text[match.start() :], "=")
        keys = object_keys(object_body(body, "params:")) if re.search(r"^\s*params\s*:", body, re.M) else []
        calls.append((match.group(1), (path.parent / match.group(2)).resolve(), keys))
    return calls


# ---- the bot's settings, from its models -----------------------------------------------------


def setting_fields(model: type[BaseModel] = BotSettings) -> dict[str, Any]:
    """Every environment variable name the settings read, with its field's annotation."""
    fields: dict[str, Any] = {}
    for info in model.model_fields.values():
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel) and not info.alias:
            fields.update(setting_fields(annotation))  # a service's own settings model (LlmSettings, …)
        elif info.alias:
            fields[info.alias] = annotation
    return fields


def container_settings() -> tuple[dict[str, str | None], set[str]]:
    """The Container App's environment: plain settings (name -> literal value, or None for an
    expression) and the names of the settings that are Key Vault references."""
    main = MAIN.read_text("utf-8")
    app = CONTAINER_APP.read_text("utf-8")
    plain: dict[str, str | None] = {}
    settings_body = object_body(object_body(main, "module app "), "settings:")
    flat = top_level(settings_body)
    for key in object_keys(settings_body):
        line = re.search(rf"^\s*{key}\s*:(.*)$", settings_body, re.M)
        literal = re.fullmatch(r"\s*'([^'$]*)'\s*", line.group(1)) if line and "'" in line.group(1) else None
        plain[key] = literal.group(1) if literal else None
    assert flat.strip(), "main.bicep passes no settings to the container app"
    for name, value in re.findall(r"\{\s*name:\s*'(\w+)',\s*value:\s*([^}]*?)\s*\}", app):
        literal = re.fullmatch(r"'([^'$]*)'", value)
        plain[name] = literal.group(1) if literal else None
    secret = set(re.findall(r"\{\s*env:\s*'(\w+)',\s*secret:", app))
    return plain, secret


# ---- Bicep -----------------------------------------------------------------------------------


def test_every_module_exists_and_is_used() -> None:
    used: set[Path] = set()
    for path in BICEP_FILES:
        for name, target, _keys in module_calls(path):
            assert target.is_file(), f"{path.relative_to(ROOT)}: module {name} points at missing {target}"
            used.add(target)
    unused = {p.resolve() for p in (INFRA / "modules").glob("*.bicep")} - used
    assert not unused, f"modules nothing deploys: {sorted(p.name for p in unused)}"


def test_every_module_call_passes_exactly_its_params() -> None:
    for path in BICEP_FILES:
        for name, target, keys in module_calls(path):
            params = bicep_params(target.read_text("utf-8"))
            unknown = set(keys) - set(params)
            missing = {p for p, info in params.items() if not info["default"]} - set(keys)
            where = f"{path.relative_to(ROOT)}: module {name} ({target.name})"
            assert not unknown, f"{where} passes params it does not declare: {sorted(unknown)}"
            assert not missing, f"{where} leaves required params out: {sorted(missing)}"


def test_every_module_output_used_is_declared() -> None:
    for path in BICEP_FILES:
        text = path.read_text("utf-8")
        modules = {name: target for name, target, _keys in module_calls(path)}
        for name, output in re.findall(r"\b(\w+)!?\.outputs\.(\w+)", text):
            assert name in modules, f"{path.relative_to(ROOT)}: {name} is not a module"
            declared = bicep_outputs(modules[name].read_text("utf-8"))
            assert output in declared, (
                f"{path.relative_to(ROOT)}: {modules[name].name} has no output {output}"
            )


def test_parameters_file_matches_main_bicep() -> None:
    params = bicep_params(MAIN.read_text("utf-8"))
    given = set(json.loads(PARAMETERS.read_text("utf-8"))["parameters"])
    assert given <= set(params), f"main.parameters.json sets unknown params: {sorted(given - set(params))}"
    required = {p for p, info in params.items() if not info["default"]}
    assert required <= given, f"main.parameters.json leaves required params out: {sorted(required - given)}"


def test_secret_params_are_secure() -> None:
    """A password, key or secret passed as a plain param would be shown in the deployment's history."""
    for path in BICEP_FILES:
        for name, info in bicep_params(path.read_text("utf-8")).items():
            if re.search(r"(password|secret|key)$", name, re.I) and not name.endswith("Name"):
                assert info["secure"], f"{path.relative_to(ROOT)}: param {name} is not @secure()"


def test_generated_secrets_are_read_back_from_the_vault_the_template_writes() -> None:
    """azd's secretOrRandomPassword keeps a password stable only if it names the vault output and a
    secret the template really writes; otherwise every provision would make a new one."""
    parameters = PARAMETERS.read_text("utf-8")
    written = set()
    for path in BICEP_FILES:
        text = path.read_text("utf-8")
        for match in re.finditer(r"'Microsoft\.KeyVault/vaults/secrets@[^']+'\s*=", text):
            written.update(
                re.findall(r"^\s*name:\s*'([\w-]+)'", object_body(text[match.start() :], "="), re.M)
            )
    calls = re.findall(r"\$\(secretOrRandomPassword \$\{(\w+)\} ([\w-]+)\)", parameters)
    assert calls, "main.parameters.json generates no secret"
    outputs = bicep_outputs(MAIN.read_text("utf-8"))
    for vault_variable, secret in calls:
        assert vault_variable in outputs, f"{vault_variable} is not an output of main.bicep"
        assert secret in written, f"no Key Vault secret named {secret!r} is written by infra/"


def test_container_app_sets_only_settings_the_bot_reads() -> None:
    from azure.identity._constants import EnvironmentVariables

    assert {EnvironmentVariables.AZURE_CLIENT_ID} == LIBRARY_SETTINGS
    fields = setting_fields()
    plain, secret = container_settings()
    names = set(plain) | secret
    assert {"MicrosoftAppId", "MicrosoftAppType", "PORT", "PUBLIC_BASE_URL"} <= names
    unknown = names - set(fields) - LIBRARY_SETTINGS
    assert not unknown, f"the Container App sets variables no setting reads: {sorted(unknown)}"
    assert not set(plain) & secret, f"set both plainly and from Key Vault: {sorted(set(plain) & secret)}"


def test_every_secret_setting_comes_from_key_vault() -> None:
    fields = setting_fields()
    plain, secret = container_settings()
    plain_secrets = {name for name in plain if fields.get(name) is SecretStr}
    # A DSN is a secret setting because it may hold a password; with Entra login it holds none (the
    # token is the password: tests/infra/test_infra_keyless.py checks the URL has no password part).
    if plain.get("CRAG_POSTGRES_AUTH") == "entra":
        plain_secrets.discard("CRAG_POSTGRES_URL")
    assert not plain_secrets, f"secret settings given as plain values: {sorted(plain_secrets)}"
    not_secret = {name for name in secret if fields.get(name) is not SecretStr}
    assert not not_secret, f"Key Vault references for settings that are not secrets: {sorted(not_secret)}"


def test_literal_settings_are_valid_and_the_identity_type_is_supported() -> None:
    """The values written literally into the template pass the bot's own validation, and botbuilder
    builds managed-identity credentials from MicrosoftAppType (no password needed)."""
    from botbuilder.integration.aiohttp import ConfigurationServiceClientCredentialFactory
    from botframework.connector.auth import ManagedIdentityServiceClientCredentialsFactory

    plain, _secret = container_settings()
    literals = {name: value for name, value in plain.items() if value is not None}
    assert literals.get("MicrosoftAppType") == "UserAssignedMSI"
    # model_validate: the template's values alone, not this machine's environment or .env.
    settings = BotSettings.model_validate(
        {
            **literals,
            "MicrosoftAppId": "00000000-0000-0000-0000-000000000001",
            "MicrosoftAppTenantId": "00000000-0000-0000-0000-000000000002",
        }
    )
    factory = ConfigurationServiceClientCredentialFactory(settings.bot_framework_config())
    assert isinstance(factory._inner, ManagedIdentityServiceClientCredentialsFactory)


def test_health_probe_path_is_served_by_the_app() -> None:
    probes = set(re.findall(r"path:\s*'([^']+)'", CONTAINER_APP.read_text("utf-8")))
    assert probes == {"/api/health"}
    assert 'add_get("/api/health"' in (ROOT / "app.py").read_text("utf-8")


def test_bicep_files_parse() -> None:
    pycep = pytest.importorskip("pycep", reason="pycep-parser (a Bicep parser) is not installed")
    for path in BICEP_FILES:
        parsed = pycep.BicepParser().parse(text=path.read_text("utf-8"))
        assert parsed.get("resources") or parsed.get("modules"), f"{path.name}: nothing declared"


def _bicep() -> str | None:
    found = shutil.which("bicep")
    installed_by_az = Path.home() / ".azure" / "bin" / "bicep"
    return found or (str(installed_by_az) if installed_by_az.is_file() else None)


def test_bicep_builds_and_lints_clean(tmp_path: Path) -> None:
    bicep = _bicep()
    if bicep is None:
        pytest.skip("no Bicep CLI on PATH or in ~/.azure/bin")
    for command in (["build", str(MAIN), "--outdir", str(tmp_path)], ["lint", str(MAIN)]):
        run = subprocess.run([bicep, *command], capture_output=True, text=True, timeout=120)
        # BCP081: an API version newer than this Bicep's type catalogue, not a defect of the template.
        diagnostics = [line for line in run.stderr.splitlines() if line.strip() and "BCP081" not in line]
        assert run.returncode == 0 and not diagnostics, f"bicep {command[0]}:\n{run.stderr}"


# ---- azd and the Microsoft 365 Agents Toolkit ------------------------------------------------


def _yaml_paths(text: str) -> list[str]:
    """Relative paths (`./…`) a YAML file names as values, but for files its steps write (`target:`)."""
    return [path for key, path in re.findall(r"(\w+):\s+(\./[^\s\"']+)", text) if key != "target"]


def test_azure_yaml_points_at_files_that_exist() -> None:
    text = (ROOT / "azure.yaml").read_text("utf-8")
    assert re.search(r"^\s+path:\s+infra$", text, re.M) and re.search(r"^\s+module:\s+main$", text, re.M)
    assert re.search(r"^\s+host:\s+containerapp$", text, re.M)
    for relative in _yaml_paths(text):
        assert (ROOT / relative).exists(), f"azure.yaml names {relative}, which does not exist"
    # azd deploys the `bot` service to the resource tagged with its name.
    assert re.search(r"^  bot:$", text, re.M)
    assert "'azd-service-name': 'bot'" in CONTAINER_APP.read_text("utf-8")


def test_toolkit_files_point_at_files_that_exist() -> None:
    for path in TOOLKIT_FILES:
        text = path.read_text("utf-8")
        for relative in _yaml_paths(text):
            if "${{" in relative or relative.startswith("./dist/"):
                continue  # written by the steps themselves
            assert (ROOT / relative).exists(), f"{path.name} names {relative}, which does not exist"
        folder = re.search(r"^environmentFolderPath:\s+(\S+)$", text, re.M)
        assert folder is None or (ROOT / folder.group(1)).is_dir()


def _written_by(text: str) -> set[str]:
    """Variables a toolkit file's steps write into its environment."""
    written = set(re.findall(r"::set-teamsfx-env (\w+)=", text))
    for block in re.findall(r"writeToEnvironmentFile:\n((?:\s{6}\w+: \w+\n)+)", text):
        written.update(re.findall(r":\s+(\w+)", block))
    return written


def _env_file_keys(path: Path) -> set[str]:
    return set(re.findall(r"^([A-Za-z_]\w*)=", path.read_text("utf-8"), re.M))


def test_every_placeholder_of_the_dev_environment_gets_a_value() -> None:
    """The manifest (and its localization files) and m365agents.yml use only variables that
    env/.env.dev defines or that a provision step writes; the toolkit would stop on any other."""
    text = TOOLKIT_FILES[0].read_text("utf-8")
    known = _env_file_keys(ROOT / "env" / ".env.dev") | _written_by(text) | {"TEAMSFX_ENV"}
    package_files = [ROOT / "appPackage" / "manifest.json"]
    manifest = json.loads(package_files[0].read_text("utf-8"))
    for language in (manifest.get("localizationInfo") or {}).get("additionalLanguages") or []:
        package_files.append(ROOT / "appPackage" / language["file"])
    for path in [*package_files, TOOLKIT_FILES[0]]:
        used = set(re.findall(r"\$\{\{\s*(\w+)\s*\}\}", path.read_text("utf-8")))
        assert used, f"{path.name} has no placeholder: the check reads the wrong syntax"
        assert used <= known, f"{path.name}: no value for {sorted(used - known)}"


def test_toolkit_reads_only_outputs_main_bicep_has() -> None:
    outputs = bicep_outputs(MAIN.read_text("utf-8"))
    read = set(re.findall(r"azd env get-value (\w+)", TOOLKIT_FILES[0].read_text("utf-8")))
    assert read, "m365agents.yml reads no azd output"
    assert read <= outputs, f"not outputs of main.bicep: {sorted(read - outputs)}"


def test_toolkit_derives_the_teams_app_id_the_package_tool_does() -> None:
    """Both ways of building the Teams package must update one Teams app, not make two."""
    from tools.build_teams_package import derived_teams_app_id

    text = TOOLKIT_FILES[0].read_text("utf-8")
    code = re.search(r"python3 -c '([^']+)' \"\$app_id\"", text)
    assert code, "m365agents.yml no longer derives TEAMS_APP_ID with python3 -c"
    app_id = "2B6F1F3E-1C4D-4E5F-9A8B-7C6D5E4F3A2B"
    run = subprocess.run(
        [sys.executable, "-c", code.group(1), app_id], capture_output=True, text=True, check=True
    )
    assert run.stdout.strip() == derived_teams_app_id(app_id)


def test_local_debugging_registers_a_single_tenant_bot() -> None:
    """Azure creates no new multi-tenant bots: the toolkit's local environment makes an Entra app of
    this tenant only, an Azure Bot of type SingleTenant for it, and the bot's .env says so, which
    botbuilder turns into credentials for that tenant."""
    import yaml
    from botframework.connector.auth import PasswordServiceClientCredentialFactory

    local = yaml.safe_load(TOOLKIT_FILES[1].read_text("utf-8"))
    steps = {step["uses"]: step for step in local["provision"] + local["deploy"]}
    assert not {"botAadApp/create", "botFramework/create"} & set(steps)  # multi-tenant registrations
    app = steps["aadApp/create"]
    assert app["with"]["signInAudience"] == "AzureADMyOrg"
    assert app["writeToEnvironmentFile"]["tenantId"] == "MICROSOFT_APP_TENANT_ID"
    (template,) = steps["arm/deploy"]["with"]["templates"]
    bicep = (ROOT / template["path"]).read_text("utf-8")
    assert "msaAppType: 'SingleTenant'" in bicep and "msaAppTenantId: tenantId" in bicep
    parameters = json.loads((ROOT / template["parameters"]).read_text("utf-8"))["parameters"]
    assert parameters["tenantId"]["value"] == "${{MICROSOFT_APP_TENANT_ID}}"
    assert parameters["appId"]["value"] == "${{MICROSOFT_APP_ID}}"
    envs = steps["file/createOrUpdateEnvironmentFile"]["with"]["envs"]
    assert envs["MicrosoftAppType"] == "SingleTenant"
    assert envs["MicrosoftAppTenantId"] == "${{MICROSOFT_APP_TENANT_ID}}"
    # Nothing in the toolkit files or the deploy page registers a multi-tenant bot any more.
    for path in (*TOOLKIT_FILES, ROOT / "docs" / "deploy.md"):
        assert "MultiTenant" not in path.read_text("utf-8").replace("multi-tenant", ""), path.name

    settings = BotSettings.model_validate(
        {
            "MicrosoftAppId": "00000000-0000-0000-0000-000000000001",
            "MicrosoftAppPassword": "local-secret",
            "MicrosoftAppType": envs["MicrosoftAppType"],
            "MicrosoftAppTenantId": "00000000-0000-0000-0000-000000000002",
        }
    )
    from botbuilder.integration.aiohttp import ConfigurationServiceClientCredentialFactory

    factory = ConfigurationServiceClientCredentialFactory(settings.bot_framework_config())
    assert isinstance(factory._inner, PasswordServiceClientCredentialFactory)
    assert factory._inner.tenant_id == "00000000-0000-0000-0000-000000000002"
