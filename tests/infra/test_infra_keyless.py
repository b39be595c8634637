"""The Azure deployment is keyless, read with a Bicep parser (pycep-parser; the Bicep CLI cannot be
installed here): no key or password of a data service reaches the app, local auth is off on Search,
Storage and Redis, PostgreSQL takes Entra tokens only, and each identity's role assignments are
exactly the listed ones (least privilege).
"""

from __future__ import annotations

import re

from tests.infra.bicep_read import INFRA, MAIN, calls, expr, module, params, parse, resources, same

# Built-in role definition ids and what the bot identity needs each for.
BOT_ROLES = {
    "7f951dda-4ed3-4680-a7ca-43fe172d538d": "AcrPull (its image)",
    "4633458b-17de-408a-b874-0445c86b69e6": "Key Vault Secrets User (the SerpAPI key, link secret)",
    "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd": "Cognitive Services OpenAI User",
    "ba92f5b4-2d11-453d-a403-e96b0029c9fe": "Storage Blob Data Contributor (state, vector cache)",
    "1407120a-92aa-4202-b7e9-c0e197c71c8f": "Search Index Data Reader (queries only)",
}
# The migration job's identity: its image, and the PostgreSQL administrator (not a role assignment).
MIGRATE_ROLES = {"7f951dda-4ed3-4680-a7ca-43fe172d538d": "AcrPull (its image)"}
# Functions whose result is an account key, a connection string with one, or an admin key.
KEY_FUNCTIONS = re.compile(r"\b(listKeys|listQueryKeys|listAdminKeys|listConnectionStrings)\s*\(")


def granted_roles(principal: str) -> dict[str, list[str]]:
    """Role definition id -> where (module file:resource, its scope), for every role assignment
    main.bicep's modules give the identity module `principal` (its outputs.principalId, passed as a
    param or in an array param)."""
    wanted = expr(f"{principal}.outputs.principalId")
    granted: dict[str, list[str]] = {}
    for call in calls().values():
        names = set()
        for name, value in (call["config"].get("params") or {}).items():
            if same(value, wanted) or (isinstance(value, list) and any(same(v, wanted) for v in value)):
                names.add(name)
        if not names:
            continue
        path = call["path"]
        parsed = parse(path)
        variables = parsed.get("variables") or {}
        for name, resource in (parsed.get("resources") or {}).items():
            if resource["type"] != "Microsoft.Authorization/roleAssignments":
                continue
            config = resource["config"]
            loop = config.get("loop_type") if isinstance(config, dict) else None
            body = config["config"] if "condition" in config else config
            who = body["properties"]["principalId"]
            # A loop over an array param grants each item: the identity is in it if it is in the array.
            through = loop["detail"]["array_name"] if loop and who == loop["detail"]["item_name"] else who
            if through not in names:
                continue
            role = body["properties"]["roleDefinitionId"]["function"]["parameters"]["resource_name_1"]
            role_id = variables[role]["value"] if role in variables else role
            # Scoped to one resource of the module, never the resource group or subscription.
            assert body.get("scope"), f"{path.name}:{name} has no resource scope"
            granted.setdefault(role_id, []).append(f"{path.name}:{name}:{body['scope']}")
    return granted


def test_no_key_or_connection_string_of_a_data_service_is_read() -> None:
    for path in sorted(INFRA.rglob("*.bicep")):
        for line in path.read_text("utf-8").splitlines():
            if KEY_FUNCTIONS.search(line):
                # The one exception: the Container Apps environment ships its own logs to Log
                # Analytics with the workspace key; it never reaches the app.
                assert "logAnalytics.listKeys().primarySharedKey" in line, f"{path.name}: {line.strip()}"


def test_the_app_gets_no_key_setting() -> None:
    text = (module("containerapp")).read_text("utf-8") + MAIN.read_text("utf-8")
    for setting in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_SEARCH_API_KEY", "AZURE_OPENAI_API_KEY"):
        assert setting not in text, setting
    assert "AZURE_STORAGE_ACCOUNT_URL: storage.outputs.blobEndpoint" in MAIN.read_text("utf-8")
    assert "CRAG_REDIS_AUTH: 'entra'" in MAIN.read_text("utf-8")


def test_local_auth_is_off_on_search_storage_and_redis() -> None:
    (search,) = resources(module("search"), "Microsoft.Search/searchServices").values()
    assert search["properties"]["disableLocalAuth"] is True
    (account,) = resources(module("storage"), "Microsoft.Storage/storageAccounts").values()
    assert account["properties"]["allowSharedKeyAccess"] is False
    assert account["properties"]["allowBlobPublicAccess"] is False
    (database,) = resources(module("redis"), "Microsoft.Cache/redisEnterprise/databases").values()
    assert database["properties"]["accessKeysAuthentication"] == "Disabled"
    (policy,) = resources(
        module("redis"), "Microsoft.Cache/redisEnterprise/databases/accessPolicyAssignments"
    ).values()
    assert policy["properties"]["user"]["objectId"] == "botPrincipalId"


def test_the_redis_url_names_the_identity_and_holds_no_password() -> None:
    text = module("redis").read_text("utf-8")
    (url,) = re.findall(r"value: '(rediss://[^']+)'", text)
    assert url.startswith("rediss://${botPrincipalId}@") and ":${" not in url.split("@")[0]


def test_each_identity_has_exactly_the_listed_roles() -> None:
    for principal, listed in (("identity", BOT_ROLES), ("migrateIdentity", MIGRATE_ROLES)):
        granted = granted_roles(principal)
        assert all(len(places) == 1 for places in granted.values()), granted
        assert set(granted) == set(listed), (
            principal,
            {r: listed.get(r, "unexpected") for r in set(granted) ^ set(listed)},
        )


def test_postgres_is_entra_only_with_no_open_firewall() -> None:
    (server,) = resources(module("postgres"), "Microsoft.DBforPostgreSQL/flexibleServers").values()
    properties = server["properties"]
    auth = properties["authConfig"]
    assert auth["activeDirectoryAuth"] == "Enabled" and auth["passwordAuth"] == "Disabled"
    assert "administratorLogin" not in properties and "administratorLoginPassword" not in properties
    assert properties["network"]["publicNetworkAccess"] == "Disabled"
    for path in sorted(INFRA.rglob("*.bicep")):
        assert not resources(path, "Microsoft.DBforPostgreSQL/flexibleServers/firewallRules"), path.name
        assert "0.0.0.0" not in path.read_text("utf-8"), path.name
    # Its one Entra administrator is the migration identity, never the bot's.
    (admin,) = resources(
        module("postgres"), "Microsoft.DBforPostgreSQL/flexibleServers/administrators"
    ).values()
    assert admin["name"] == "adminPrincipalId"
    assert same(params("postgres")["adminPrincipalId"], expr("migrateIdentity.outputs.principalId"))
    # Reached through its private endpoint (modules/private-endpoint.bicep), in both network modes.
    endpoint = calls()["postgresEndpoint"]
    assert endpoint["condition"] is None
    assert same(endpoint["config"]["params"]["targetId"], expr("postgres.outputs.id"))
    assert endpoint["config"]["params"]["groupId"] == "postgresqlServer"


def test_the_bot_logs_in_as_its_own_role_and_the_migration_job_owns_the_schema() -> None:
    text = module("postgres").read_text("utf-8")
    urls = dict(re.findall(r"output (\w+Url) string = '(postgresql://[^']+)'", text))
    assert set(urls) == {"botUrl", "migrationUrl"}
    for url in urls.values():  # the user is a role; no password (the token is one)
        assert url.startswith("postgresql://${") and ":" not in url.split("@")[0].removeprefix("postgresql:")
    settings = params("app")["settings"]
    assert same(settings["CRAG_POSTGRES_URL"], expr("postgres.outputs.botUrl"))
    assert (settings["CRAG_POSTGRES_AUTH"], settings["CRAG_POSTGRES_MIGRATE"]) == ("entra", "false")
    job = params("migrateJob")
    assert same(job["identityName"], expr("migrateIdentity.outputs.name"))
    assert same(job["settings"]["CRAG_POSTGRES_URL"], expr("postgres.outputs.migrationUrl"))
    command = job["command"]
    assert command[:4] == ["crag-feedback", "--store", "postgres", "migrate"]
    assert command[command.index("--grant") + 1] == "postgresBotRole"
    assert same(command[command.index("--object-id") + 1], expr("identity.outputs.principalId"))
    assert same(params("postgres")["botRoleName"], "postgresBotRole")
    # No password reaches the vault, nor a secret setting of the app.
    assert "postgres" not in module("keyvault").read_text("utf-8").lower()
    assert "CRAG_POSTGRES_URL" not in module("containerapp").read_text("utf-8")
