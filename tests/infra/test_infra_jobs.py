"""The jobs of the Azure deployment: the indexing job (crag-ingest from SharePoint into AI Search,
hourly and on demand, as its own identity, the only one that may write the index) and azd's hook
that runs the migration and then the indexing once (deploy/azd/start-jobs.sh, run here against a
fake `az` that records its calls)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from tests.infra.bicep_read import MAIN, deployed_modules, evaluate, expr, module, params, same, scope_of
from tests.infra.test_infra_files import setting_fields
from tests.infra.test_infra_keyless import granted_roles
from tests.paths import ROOT

HOOK = ROOT / "deploy" / "azd" / "start-jobs.sh"
SECRETS_USER = "4633458b-17de-408a-b874-0445c86b69e6"
INDEX_ROLES = {
    "7f951dda-4ed3-4680-a7ca-43fe172d538d": "AcrPull (the image)",
    "8ebe5a00-799e-43f5-93ac-243d3dce952c": "Search Index Data Contributor (writes the index)",
    "7ca78c08-252a-4471-8644-bb5ff32d4ba0": "Search Service Contributor (creates the index definition)",
    "5e0bd9bd-7b93-4f28-af87-19fc36ad61bd": "Cognitive Services OpenAI User (embeddings)",
    SECRETS_USER: "Key Vault Secrets User, on the App Insights secret only",
}
# Read by libraries, not by the settings models: azure-identity, OpenTelemetry.
LIBRARY_SETTINGS = {"AZURE_CLIENT_ID", "OTEL_SERVICE_NAME"}


def test_only_the_indexing_identity_writes_the_index() -> None:
    granted = granted_roles("indexIdentity")
    assert set(granted) == set(INDEX_ROLES), {
        r: INDEX_ROLES.get(r, "unexpected") for r in set(granted) ^ set(INDEX_ROLES)
    }
    # Its secrets role is on single secrets, never the vault (the SerpAPI key, the link secret).
    assert [p.rsplit(":", 1)[1] for p in granted[SECRETS_USER]] == ["appInsightsSecret"]
    for writer in ("8ebe5a00-799e-43f5-93ac-243d3dce952c", "7ca78c08-252a-4471-8644-bb5ff32d4ba0"):
        for other in ("identity", "migrateIdentity"):
            assert writer not in granted_roles(other), (writer, other)


def test_the_indexing_job_runs_hourly_and_on_demand_with_its_identity() -> None:
    assert "indexJob" not in deployed_modules({})  # no SharePoint site: nothing to index
    path, written, values = deployed_modules({"sharePointSite": "https://contoso.sharepoint.com/sites/hr"})[
        "indexJob"
    ]
    assert path == module("job").resolve()
    assert values["cronExpression"] == "0 * * * *"
    assert same(written["identityName"], expr("indexIdentity.outputs.name"))
    assert written["command"] == ["crag-ingest", "--source", "sharepoint", "--target", "azure"]
    job = scope_of(module("job"), values)
    trigger = evaluate(expr("empty(cronExpression) ? 'Manual' : 'Schedule'"), job)
    assert trigger == "Schedule"  # a scheduled job also starts on demand (az containerapp job start)
    text = module("job").read_text("utf-8")
    assert "triggerType: empty(cronExpression) ? 'Manual' : 'Schedule'" in text
    # The migration job is on demand only.
    assert "cronExpression" not in params("migrateJob")

    settings = written["settings"]
    known = set(setting_fields()) | LIBRARY_SETTINGS
    assert set(settings) <= known, set(settings) - known
    # Cited files of a folder source link to the bot's /docs, the base the bot itself uses.
    assert same(settings["CRAG_DOCS_BASE_URL"], expr("app.outputs.docsBaseUrl"))
    app = module("containerapp").read_text("utf-8")
    assert "{ name: 'CRAG_DOCS_BASE_URL', value: '${publicBaseUrl}/docs' }" in app
    assert "output docsBaseUrl string = '${publicBaseUrl}/docs'" in app
    # No key: the index is written with the job identity's token.
    assert not {"AZURE_SEARCH_API_KEY", "AZURE_OPENAI_API_KEY"} & set(settings)


def test_azd_runs_the_hook_after_provision_and_deploy() -> None:
    hooks = yaml.safe_load((ROOT / "azure.yaml").read_text("utf-8"))["hooks"]
    for event in ("postprovision", "postdeploy"):
        assert hooks[event]["posix"]["run"] == "./deploy/azd/start-jobs.sh"
    placeholder = module("app-image").read_text("utf-8").split("var placeholderImage = '")[1].split("'")[0]
    assert f'placeholder="{placeholder}"' in HOOK.read_text("utf-8")
    for name in (
        "AZURE_MIGRATE_JOB_NAME",
        "AZURE_INDEX_JOB_NAME",
        "SERVICE_BOT_NAME",
        "AZURE_RESOURCE_GROUP",
    ):
        assert f"output {name} string" in MAIN.read_text("utf-8"), name


FAKE_AZ = """#!/bin/sh
echo "$*" >> "$AZ_LOG"
case "$*" in
  "containerapp show"*) echo "$AZ_IMAGE" ;;
  "containerapp job start"*) echo "exec-$5" ;;
  "containerapp job execution show"*)
    status="$(head -n 1 "$AZ_STATUSES")"; tail -n +2 "$AZ_STATUSES" > "$AZ_STATUSES.next"
    mv "$AZ_STATUSES.next" "$AZ_STATUSES"; echo "$status" ;;
esac
"""


def _hook(
    tmp_path: Path, image: str, statuses: list[str], index: str = "job-index"
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(FAKE_AZ)
    (bin_dir / "az").chmod(0o755)
    (tmp_path / "statuses").write_text("".join(f"{s}\n" for s in statuses))
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "AZ_LOG": str(tmp_path / "az.log"),
        "AZ_IMAGE": image,
        "AZ_STATUSES": str(tmp_path / "statuses"),
        "AZURE_RESOURCE_GROUP": "rg-dev",
        "SERVICE_BOT_NAME": "ca-bot",
        "AZURE_MIGRATE_JOB_NAME": "job-migrate",
        "AZURE_INDEX_JOB_NAME": index,
        "CRAG_JOB_POLL_SECONDS": "0",
        "CRAG_JOB_POLL_TRIES": "5",
    }
    done = subprocess.run(["sh", str(HOOK)], env=env, capture_output=True, text=True, timeout=60, check=False)
    log = (tmp_path / "az.log").read_text().splitlines() if (tmp_path / "az.log").exists() else []
    return done, log


def test_the_hook_migrates_then_indexes_with_the_bot_s_image(tmp_path: Path) -> None:
    done, calls = _hook(tmp_path, "cr.azurecr.io/bot:v7", ["Running", "Running", "Succeeded"])
    assert done.returncode == 0, done.stderr
    assert [c.split(" -")[0] for c in calls] == [
        "containerapp show",
        "containerapp job update",
        "containerapp job update",
        "containerapp job start",
        "containerapp job execution show",
        "containerapp job execution show",
        "containerapp job execution show",
        "containerapp job start",
    ]
    assert all("--image cr.azurecr.io/bot:v7" in c for c in calls[1:3])
    assert "-n job-migrate" in calls[3] and "--job-execution-name exec-job-migrate" in calls[4]
    assert "-n job-index" in calls[-1]


def test_the_hook_stops_when_the_migration_fails_and_waits_for_a_deploy(tmp_path: Path) -> None:
    done, calls = _hook(tmp_path, "cr.azurecr.io/bot:v7", ["Running", "Failed"])
    assert done.returncode == 1 and "migration exec-job-migrate Failed" in done.stderr
    assert "az containerapp job logs show -n job-migrate" in done.stderr
    assert not any("-n job-index" in c and "job start" in c for c in calls)

    (tmp_path / "again").mkdir()
    done, calls = _hook(tmp_path / "again", "cr.azurecr.io/bot:v7", ["Running"] * 9)
    assert done.returncode == 1 and "still Running" in done.stderr

    (tmp_path / "first").mkdir()
    placeholder = "mcr.microsoft.com/azuredocs/containerapps-helloworld:latest"
    done, calls = _hook(tmp_path / "first", placeholder, [])
    assert done.returncode == 0 and "after azd deploy" in done.stdout
    assert calls == [calls[0]] and calls[0].startswith("containerapp show")


def test_without_a_site_the_hook_migrates_only(tmp_path: Path) -> None:
    done, calls = _hook(tmp_path, "cr.azurecr.io/bot:v7", ["Succeeded"], index="")
    assert done.returncode == 0 and "no indexing job" in done.stdout
    assert [c for c in calls if "job start" in c] == [
        "containerapp job start -n job-migrate -g rg-dev --query name -o tsv"
    ]


def test_the_deploy_page_has_no_step_with_a_key_of_a_data_service() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text("utf-8")
    for key in (
        "admin-key",
        "AZURE_SEARCH_API_KEY",
        "AZURE_STORAGE_CONNECTION_STRING",
        "postgres-url",
        "query-key",
    ):
        assert key not in page, key
    # Indexing is the job's, started with az, not crag-ingest on the reader's machine.
    assert "az containerapp job start -n $(azd env get-value AZURE_INDEX_JOB_NAME)" in page
    assert "python -m crag.cli.ingest" not in page


GRANT = ROOT / "deploy" / "azd" / "grant-graph-access.sh"
FAKE_AZ_GRAPH = """#!/bin/sh
echo "$*" >> "$AZ_LOG"
case "$*" in
  "rest --method POST"*) ;;
  "ad sp show --id 00000003-0000-0000-c000-000000000000 --query id -o tsv") echo graph-sp-id ;;
  "ad sp show"*"Sites.Selected"*) echo sites-selected-role ;;
  "rest --method GET --uri https://graph.microsoft.com/v1.0/servicePrincipals/"*) echo "$AZ_HELD" ;;
  *"/v1.0/sites/contoso.sharepoint.com:/sites/hr --query id -o tsv") echo site-123 ;;
  *"/v1.0/sites/site-123/permissions"*) echo "$AZ_GRANTED" ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


def _grant(
    tmp_path: Path, held: str, granted: str, site: str = "https://contoso.sharepoint.com/sites/hr/"
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(FAKE_AZ_GRAPH)
    (bin_dir / "az").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "AZ_LOG": str(tmp_path / "az.log"),
        "AZ_HELD": held,
        "AZ_GRANTED": granted,
        "AZURE_INDEX_PRINCIPAL_ID": "mi-object-id",
        "AZURE_INDEX_CLIENT_ID": "mi-client-id",
        "AZURE_SHAREPOINT_SITE": site,
    }
    done = subprocess.run(
        ["sh", str(GRANT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    log = (tmp_path / "az.log").read_text().splitlines() if (tmp_path / "az.log").exists() else []
    return done, log


def test_the_graph_grant_gives_sites_selected_and_the_one_site_once(tmp_path: Path) -> None:
    done, calls = _grant(tmp_path, held="0", granted="0")
    assert done.returncode == 0, done.stderr
    posts = [c for c in calls if c.startswith("rest --method POST")]
    assert len(posts) == 2
    assert "servicePrincipals/mi-object-id/appRoleAssignments" in posts[0]
    assert (
        '"principalId": "mi-object-id", "resourceId": "graph-sp-id", "appRoleId": "sites-selected-role"'
        in posts[0]
    )
    assert "sites/site-123/permissions" in posts[1] and '"roles": ["fullcontrol"]' in posts[1]
    assert '"application": {"id": "mi-client-id"' in posts[1]
    # Run again with both in place: nothing is granted twice.
    (tmp_path / "again").mkdir()
    done, calls = _grant(tmp_path / "again", held="1", granted="1")
    assert done.returncode == 0 and not [c for c in calls if "POST" in c]
    assert "already has Sites.Selected" in done.stdout and "was already granted" in done.stdout


def test_the_graph_grant_refuses_a_site_that_is_not_sharepoint(tmp_path: Path) -> None:
    done, calls = _grant(tmp_path, held="0", granted="0", site="http://intranet.example/hr")
    assert done.returncode == 2 and "must look like https://<tenant>.sharepoint.com" in done.stderr
    assert calls == []


def test_the_indexing_job_reads_graph_as_its_identity_with_no_secret() -> None:
    settings = deployed_modules({"sharePointSite": "https://contoso.sharepoint.com/sites/hr"})["indexJob"][1][
        "settings"
    ]
    assert settings["GRAPH_AUTH"] == "managed_identity"
    assert not {"GRAPH_CLIENT_SECRET", "GRAPH_CLIENT_ID", "GRAPH_TENANT_ID"} & set(settings)
    assert "graph" not in (ROOT / "infra" / "main.parameters.json").read_text("utf-8").lower()
    for name in ("AZURE_INDEX_PRINCIPAL_ID", "AZURE_INDEX_CLIENT_ID", "AZURE_SHAREPOINT_SITE"):
        assert f"output {name} string" in MAIN.read_text("utf-8")
