"""Reading the Bicep files of infra/ with a parser (pycep-parser; the Bicep CLI cannot be installed
here), for the infrastructure tests. pycep turns an expression into nested dicts: `expr()` gives the
form of a Bicep expression written in text, so tests compare like with like."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
INFRA = ROOT / "infra"
MAIN = INFRA / "main.bicep"


def parse(path: Path) -> dict[str, Any]:
    pycep = pytest.importorskip("pycep", reason="pycep-parser (a Bicep parser) is not installed")
    parsed: dict[str, Any] = pycep.BicepParser().parse(text=path.read_text("utf-8"))
    return parsed


def body(config: dict[str, Any]) -> dict[str, Any]:
    """A resource's or module call's body: a conditional (`= if (...)`) or loop nests it."""
    inner: dict[str, Any] = config["config"] if "condition" in config else config
    return inner


def resources(path: Path, type_: str) -> dict[str, dict[str, Any]]:
    found = {}
    for name, resource in (parse(path).get("resources") or {}).items():
        if resource["type"] == type_:
            found[name] = body(resource["config"])
    return found


def module(name: str) -> Path:
    return INFRA / "modules" / f"{name}.bicep"


def calls(path: Path = MAIN) -> dict[str, dict[str, Any]]:
    """The module calls of a file by name: {"path": the module file, "config": body, "condition": ...}."""
    found = {}
    for name, call in (parse(path).get("modules") or {}).items():
        config = call["config"]
        found[name] = {
            "path": (path.parent / call["detail"]["path"]).resolve(),
            "config": body(config),
            "condition": config.get("condition"),
        }
    return found


def params(call: str, path: Path = MAIN) -> dict[str, Any]:
    found: dict[str, Any] = calls(path)[call]["config"].get("params") or {}
    return found


def expr(text: str) -> Any:
    """How pycep writes the Bicep expression `text` (as a module parameter's value)."""
    source = f"module m 'x.bicep' = {{\n  name: 'm'\n  params: {{\n    p: {text}\n  }}\n}}\n"
    pycep = pytest.importorskip("pycep")
    return pycep.BicepParser().parse(text=source)["modules"]["m"]["config"]["params"]["p"]


def same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
