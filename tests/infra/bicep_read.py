"""Reading the Bicep files of infra/ with a parser (pycep-parser; the Bicep CLI cannot be installed
here), for the infrastructure tests. pycep turns an expression into nested dicts: `expr()` gives the
form of a Bicep expression written in text, so tests compare like with like."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

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


class _Unknown:
    """What the evaluator below cannot work out (a resource's runtime property, a function it does
    not model): never equal to a value a test expects."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


def evaluate(node: Any, scope: dict[str, Any]) -> Any:
    """The value of a Bicep expression, for what the deployment's modes depend on: literals, params
    and variables, `? :`, `&&`, `||`, `!`, `==` and empty(). Anything else is UNKNOWN. pycep writes an
    identifier and a string literal alike, so a string naming something in scope is that thing."""
    if node is None or isinstance(node, bool | int | float):
        return node
    if isinstance(node, str):
        return scope.get(node, node)
    if isinstance(node, list):
        return [evaluate(item, scope) for item in node]
    if isinstance(node, dict) and "operator" in node:
        kind, operands = node["operator"]["type"], node["operator"]["operands"]
        if kind == "conditional":
            condition = evaluate(operands["condition"], scope)
            if not isinstance(condition, bool):
                return UNKNOWN
            return evaluate(operands["true_value" if condition else "false_value"], scope)
        if kind == "not":
            value = evaluate(operands["bool_value"], scope)
            return (not value) if isinstance(value, bool) else UNKNOWN
        if kind in ("and", "or", "equals"):
            a, b = evaluate(operands["operand_1"], scope), evaluate(operands["operand_2"], scope)
            if kind == "equals":
                return a == b if UNKNOWN not in (a, b) else UNKNOWN
            if not (isinstance(a, bool) and isinstance(b, bool)):
                return UNKNOWN
            return (a and b) if kind == "and" else (a or b)
    if isinstance(node, dict) and node.get("function", {}).get("type") == "empty":
        value = evaluate(node["function"]["parameters"]["item_to_test"], scope)
        return len(value) == 0 if isinstance(value, str | list | dict) else UNKNOWN
    return UNKNOWN


def scope_of(path: Path, given: dict[str, Any]) -> dict[str, Any]:
    """A file's params (their defaults, overridden by `given`) and its variables, in order."""
    parsed = parse(path)
    scope: dict[str, Any] = {}
    for name, param in (parsed.get("parameters") or {}).items():
        scope[name] = given[name] if name in given else evaluate(param.get("default"), scope)
    for name, variable in (parsed.get("variables") or {}).items():
        scope[name] = evaluate(variable["value"], scope)
    return scope


def deployed_modules(given: dict[str, Any]) -> dict[str, tuple[Path, dict[str, Any], dict[str, Any]]]:
    """The module calls main.bicep makes with these params: each one's file, the params it is given
    as written, and as evaluated in main.bicep's scope."""
    main = scope_of(MAIN, given)
    found = {}
    for name, call in calls().items():
        condition = evaluate(call["condition"], main) if call["condition"] is not None else True
        assert isinstance(condition, bool), f"module {name}: its condition cannot be worked out"
        if condition:
            written = call["config"].get("params") or {}
            found[name] = (call["path"], written, {k: evaluate(v, main) for k, v in written.items()})
    return found
