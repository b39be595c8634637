"""The two network modes of the Azure deployment (usePrivateEndpoint), read with a Bicep parser and
the small evaluator of tests/infra/bicep_read.py: which modules each mode deploys, and what each data
service's public access works out to. PostgreSQL is private in both; with usePrivateEndpoint every
data service has a private endpoint and its public access off."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import pytest

from tests.infra.bicep_read import MAIN, deployed_modules, evaluate, expr, module, parse, same, scope_of

# The module call of each data service, its private endpoint's sub-resource and privatelink zone.
DATA_SERVICES = {
    "search": ("searchService", "privatelink.search.windows.net"),
    "storage": ("blob", "privatelink.blob.${environment().suffixes.storage}"),
    "redis": ("redisEnterprise", "privatelink.redis.azure.net"),
    "openAi": ("account", "privatelink.openai.azure.com"),
    "keyVault": ("vault", "privatelink.vaultcore.azure.net"),
    "postgres": ("postgresqlServer", "privatelink.postgres.database.azure.com"),
}


def _public_access(path: Any, given: dict[str, Any]) -> dict[str, Any]:
    """Each resource of a module that has a public-access switch: what it works out to."""
    scope = scope_of(path, given)
    found = {}
    for name, resource in (parse(path).get("resources") or {}).items():
        config = resource["config"]
        properties = (config["config"] if "condition" in config else config).get("properties") or {}
        switch = properties.get(
            "publicNetworkAccess", (properties.get("network") or {}).get("publicNetworkAccess")
        )
        if switch is not None:
            acl = (properties.get("networkAcls") or {}).get("defaultAction")
            found[name] = (evaluate(switch, scope), evaluate(acl, scope) if acl is not None else None)
    return found


@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
def test_each_mode_s_public_access_and_private_endpoints(private: bool) -> None:
    deployed = deployed_modules({"usePrivateEndpoint": private})
    endpoints = {
        name: written
        for name, (path, written, _values) in deployed.items()
        if path == module("private-endpoint").resolve()
    }
    targets = {}
    for name, written in endpoints.items():
        (target,) = [s for s in DATA_SERVICES if same(written["targetId"], expr(f"{s}.outputs.id"))] or [
            s for s in DATA_SERVICES if same(written["targetId"], expr(f"{s}!.outputs.id"))
        ]
        assert target not in targets, f"two endpoints for {target}"
        targets[target] = written
        assert (written["groupId"], written["dnsZoneName"]) == DATA_SERVICES[target], name
        assert same(written["subnetId"], expr("network.outputs.endpointsSubnetId"))
    assert set(targets) == (set(DATA_SERVICES) if private else {"postgres"})

    for service in DATA_SERVICES:
        path, _written, values = deployed[service]
        switches = _public_access(path, values)
        assert switches, f"{service}: no public access switch"
        for resource, (access, acl) in switches.items():
            closed = private or service == "postgres"
            assert str(access).lower() == ("disabled" if closed else "enabled"), (service, resource, access)
            assert acl in (None, "Deny" if closed else "Allow"), (service, resource, acl)


def test_the_environment_is_in_the_network_and_trusts_only_its_subnet() -> None:
    network = parse(module("network"))
    variables = {k: v["value"] for k, v in network["variables"].items()}
    (vnet,) = [r for r in network["resources"].values() if r["type"] == "Microsoft.Network/virtualNetworks"]
    subnets = {s["name"]: s["properties"] for s in vnet["config"]["properties"]["subnets"]}
    apps = ipaddress.ip_network(variables[subnets["apps"]["addressPrefix"]])
    assert subnets["apps"]["delegations"][0]["properties"]["serviceName"] == "Microsoft.App/environments"
    assert apps.prefixlen == 23  # the smallest a workload-profiles environment takes
    assert same(network["outputs"]["appsPrefix"]["value"], "appsPrefix")
    app = deployed_modules({})["app"][1]
    assert same(app["infrastructureSubnetId"], expr("network.outputs.appsSubnetId"))
    assert same(app["trustedProxies"], expr("network.outputs.appsPrefix"))
    text = module("containerapp").read_text("utf-8")
    assert "{ name: 'CRAG_TRUSTED_PROXIES', value: trustedProxies }" in text
    assert "infrastructureSubnetId: infrastructureSubnetId" in text
    # No wide private range anywhere: only the subnet the ingress runs in fronts the app.
    for wide in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"):
        assert wide not in text and wide not in MAIN.read_text("utf-8")


def test_the_mode_is_an_azd_setting_off_by_default() -> None:
    assert scope_of(MAIN, {})["usePrivateEndpoint"] is False
    parameters = (MAIN.parent / "main.parameters.json").read_text("utf-8")
    assert re.search(
        r'"usePrivateEndpoint":\s*\{\s*"value":\s*"\$\{AZURE_USE_PRIVATE_ENDPOINT=false\}"', parameters
    )
