"""Every card, in Japanese and English, against the Adaptive Cards 1.5 JSON schema and through the
official renderer in headless Chromium.

The cards are built at test time (tests/cards/card_render_cases.py: real engine turns for every branch,
the welcome, thank-you and error cards), so a changed card builder is checked as it is now.

- Schema: the official Adaptive Cards 1.5 JSON schema (draft-06), vendored in tests/cards/card_render/
  (its README says where it comes from), checked with `jsonschema`. Needs no browser.
- Size: the card's JSON under 28 KB (Teams' limit on a message).
- Render: the official `adaptivecards` npm package (webchat/package.json, at the version Web Chat
  pins) in Debian's headless Chromium, with Teams' light HostConfig (from the adaptivecards-designer
  package) and a Segoe UI font stack with Japanese fallbacks, parsing as a 1.5 host, at 400 px and
  600 px. No parse or validation event, a non-zero height, nothing reaching past the card's edges
  and no element's content wider than its box (scrollWidth <= clientWidth: not spilling, not cut
  off with an ellipsis). A PNG of each card at each width (<name>-<width>.png), each card's JSON and
  report.json (what the renderer reported) go to test-artifacts/cards/.
- Preview: a Teams reply's message text (its notification preview) does not start with Markdown.

The render tests skip outside CI when Chromium or the npm package is missing (.ci/run installs both;
./run.sh or tools/webchat_install.sh installs the package).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft6Validator, ValidationError

from cards.answer_card import card_size
from tests.cards.card_render_cases import CardCase, build_cases, case_names
from tests.paths import ROOT
from tests.servers.chromium import CHROMIUM_ARGS as BROWSER_ARGS

HERE = Path(__file__).parent / "card_render"
SCHEMA = HERE / "adaptive-card-1.5.schema.json"
HOST_CONFIG = HERE / "teams-light.hostconfig.json"
PAGE = HERE / "render.html"
NODE_MODULES = ROOT / "webchat" / "node_modules"
RENDERER = NODE_MODULES / "adaptivecards" / "dist" / "adaptivecards.min.js"
RENDERER_CSS = NODE_MODULES / "adaptivecards" / "dist" / "adaptivecards.css"
MARKDOWN = NODE_MODULES / "markdown-it" / "dist" / "markdown-it.min.js"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "cards"
MAX_CARD_BYTES = 28 * 1024  # the "under 28 KB"; cards/answer_card.py aims at 28,000 bytes
WIDTHS = (400, 600)  # a narrow chat pane and a wide one
CHROMIUM_ARGS = [*BROWSER_ARGS, "--force-device-scale-factor=1"]  # screenshots at 1 px per CSS px
NAMES = case_names()


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CardCase]:
    built = build_cases(tmp_path_factory.mktemp("card-cases"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name, case in built.items():
        (ARTIFACTS / f"{name}.json").write_text(json.dumps(case.card, ensure_ascii=False, indent=1), "utf-8")
    return built


@pytest.fixture(scope="module")
def validator() -> Draft6Validator:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    Draft6Validator.check_schema(schema)
    return Draft6Validator(schema, format_checker=Draft6Validator.FORMAT_CHECKER)


def schema_errors(validator: Draft6Validator, card: dict[str, Any]) -> list[str]:
    """Each failure as "path: message", from the deepest errors under the schema's anyOf branches
    (an element is "any of" the element types: the branches of the other types are left out)."""

    def leaves(error: ValidationError) -> Iterator[ValidationError]:
        if not error.context:
            yield error
            return
        for sub in error.context:
            yield from leaves(sub)

    found: list[str] = []
    for error in validator.iter_errors(card):
        picked = [
            e
            for e in leaves(error)
            # "'ColumnSet' is not one of ['TextBlock']": the branch of another element type.
            if not (e.validator == "enum" and e.relative_path and e.relative_path[-1] == "type")
        ] or [error]
        for e in picked:
            path = "/".join(str(p) for p in e.absolute_path) or "(card)"
            line = f"{path}: {e.message[:300]}"
            if line not in found:
                found.append(line)
    return found


@pytest.mark.parametrize("name", NAMES)
def test_card_is_valid_adaptive_card_1_5(
    name: str, cases: dict[str, CardCase], validator: Draft6Validator
) -> None:
    card = dict(cases[name].card)
    assert card.get("version") == "1.5"
    # Teams' documented host extension (full-width cards) is not in the 1.5 schema: allowed at the
    # root with exactly this value, the rest of the card validated as is.
    assert card.pop("msteams", {"width": "Full"}) == {"width": "Full"}
    assert schema_errors(validator, card) == []


@pytest.mark.parametrize("name", NAMES)
def test_card_is_under_28_kb(name: str, cases: dict[str, CardCase]) -> None:
    assert card_size(cases[name].card) < MAX_CARD_BYTES


def test_the_schema_check_catches_an_invalid_card(validator: Draft6Validator) -> None:
    """The vendored schema does reject: a wrong enum value and an unknown element type."""
    card = {
        "type": "AdaptiveCard",
        "version": "1.5",
        "body": [{"type": "TextBlock", "text": "x", "size": "Huge"}, {"type": "Blink", "text": "y"}],
    }
    errors = schema_errors(validator, card)
    assert any(e.startswith("body/0/size:") for e in errors), errors
    assert any(e.startswith("body/1") for e in errors), errors


# --- the official renderer in headless Chromium ------------------------------------------------


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return "headless Chromium not found at /usr/bin/chromium (apt-get install chromium)"
    if not (RENDERER.is_file() and MARKDOWN.is_file()):
        return "adaptivecards/markdown-it not installed: run tools/webchat_install.sh (npm ci in webchat/)"
    return None


@dataclass
class Page:
    """The render page, and the script errors and console errors or warnings it logged."""

    tab: Any
    errors: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    missing = _missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI must render the cards: {missing}")
        pytest.skip(missing)
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright not installed (requirements-dev.txt)"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("card-profile")),  # a new, empty user-data-dir
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": max(WIDTHS) + 64, "height": 800},
        )
        try:
            tab = browser.new_page()
            page = Page(tab)
            tab.on("pageerror", lambda e: page.errors.append(f"page error: {e}"))
            tab.on(
                "console", lambda m: page.errors.append(m.text) if m.type in ("error", "warning") else None
            )
            # Nothing but the page and its files: a request to anywhere else fails the test.
            tab.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
            tab.goto(PAGE.as_uri())
            tab.add_style_tag(path=str(RENDERER_CSS))
            tab.add_script_tag(path=str(MARKDOWN))
            tab.add_script_tag(path=str(RENDERER))
            assert tab.evaluate("typeof window.AdaptiveCards.AdaptiveCard") == "function"
            yield page
        finally:
            browser.close()


@pytest.fixture(scope="module")
def host_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(HOST_CONFIG.read_text("utf-8"))
    return config


@pytest.fixture(scope="module")
def rendered(page: Page, host_config: dict[str, Any]) -> Iterator[dict[str, dict[int, dict[str, Any]]]]:
    """Each card's renders by width, made once (by the first test that asks); what the renderer said
    of every card goes to test-artifacts/cards/report.json when the module's tests are done."""
    results: dict[str, dict[int, dict[str, Any]]] = {}
    yield results
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    flat = {f"{name}-{width}": out for name, by_width in results.items() for width, out in by_width.items()}
    (ARTIFACTS / "report.json").write_text(json.dumps(flat, ensure_ascii=False, indent=1), "utf-8")


def render(
    case: CardCase, page: Page, host_config: dict[str, Any], rendered: dict[str, dict[int, dict[str, Any]]]
) -> dict[int, dict[str, Any]]:
    if case.name in rendered:
        return rendered[case.name]
    by_width: dict[int, dict[str, Any]] = {}
    for width in WIDTHS:
        page.errors.clear()
        out: dict[str, Any] = page.tab.evaluate(
            "([card, config, width, lang]) => renderCard(card, config, width, lang)",
            [case.card, host_config, width, case.lang],
        )
        shot = ARTIFACTS / f"{case.name}-{width}.png"
        page.tab.locator("#frame").screenshot(path=str(shot))
        out["page_errors"] = list(page.errors)
        out["screenshot"] = str(shot.relative_to(ROOT))
        out["bytes"] = card_size(case.card)
        by_width[width] = out
    rendered[case.name] = by_width
    return by_width


@pytest.mark.parametrize("name", NAMES)
def test_card_renders_without_errors(
    name: str,
    cases: dict[str, CardCase],
    page: Page,
    host_config: dict[str, Any],
    rendered: dict[str, dict[int, dict[str, Any]]],
) -> None:
    """The renderer parses the card as a 1.5 host with no parse or validation event (unknown
    element or action, unsupported or invalid property, duplicate id...), the page logs no script
    error or console warning, and the card has a height."""
    problems: list[str] = []
    for width, out in render(cases[name], page, host_config, rendered).items():
        problems += [
            f"{width}px {e['phase']} {e['event']} {e['source']}#{e['id']}: {e['message']}"
            for e in out["events"]
        ]
        problems += [f"{width}px page: {e}" for e in out["page_errors"]]
        if out["height"] <= 0:
            problems.append(f"{width}px: rendered with height {out['height']}")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("name", NAMES)
def test_card_fits_the_width(
    name: str,
    cases: dict[str, CardCase],
    page: Page,
    host_config: dict[str, Any],
    rendered: dict[str, dict[int, dict[str, Any]]],
) -> None:
    """At 400 px and 600 px nothing reaches past the card's edges, and no element's content is
    wider than its box (scrollWidth <= clientWidth): neither spilling out nor cut off with an ellipsis."""
    problems: list[str] = []
    for width, out in render(cases[name], page, host_config, rendered).items():
        problems += [f"{width}px overflows: {o}" for o in out["overflow"]]
        problems += [f"{width}px cut off: {c}" for c in out["clipped"]]
    assert problems == [], "\n".join(problems)


TEAMS_REPLIES = [n for n in NAMES if n.endswith("-teams")]
# A Markdown block marker at the start of a line: a list item, heading or quote shows as typed.
MARKDOWN_START = re.compile(r"^\s*([-*+>#]\s|\d+[.)]\s)")


@pytest.mark.parametrize("name", TEAMS_REPLIES)
def test_teams_notification_preview_first_line(name: str, cases: dict[str, CardCase]) -> None:
    """In Teams the answer is the message text, and its first line is what a notification shows:
    plain words, not a Markdown marker."""
    lines = [line.strip() for line in cases[name].message_text.splitlines() if line.strip()]
    assert lines, "the Teams reply has no message text"
    assert not MARKDOWN_START.match(lines[0]), f"the preview starts with Markdown: {lines[0][:120]!r}"


def test_the_render_check_catches_a_broken_card(
    page: Page, host_config: dict[str, Any], rendered: dict[str, dict[int, dict[str, Any]]]
) -> None:
    """The renderer's checks do report: a duplicate id, an unknown element, a column wider than the
    card and a button title too long for its button."""
    card = {
        "type": "AdaptiveCard",
        "version": "1.5",
        "body": [
            {"type": "TextBlock", "id": "same", "text": "one"},
            {"type": "TextBlock", "id": "same", "text": "two"},
            {"type": "Blink", "text": "unknown"},
            {
                "type": "ColumnSet",
                "columns": [
                    {"type": "Column", "width": "700px", "items": [{"type": "TextBlock", "text": "wide"}]}
                ],
            },
        ],
        "actions": [{"type": "Action.Submit", "title": "A button title far too long for any button " * 3}],
    }
    out = render(CardCase("selfcheck-broken", "en", card), page, host_config, rendered)[400]
    events = {e["event"] for e in out["events"]}
    assert {"DuplicateId", "UnknownElementType"} <= events, out["events"]
    assert any('"wide"' in o for o in out["overflow"]), out["overflow"]
    assert any("button" in c and "ellipsis" in c for c in out["clipped"]), out["clipped"]
