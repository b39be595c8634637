"""docs/deploy.md walked as a newcomer would, checked where a test can: the steps come in order,
what step 1 sets before `azd up` is a parameter azd reads, every value read back with
`azd env get-value` is an output the template writes, and the local debugging steps run in an order
that works (the tunnel before its host is written down, provision before deploy before the bot)."""

from __future__ import annotations

import re

from tests.paths import ROOT

PAGE = (ROOT / "docs" / "deploy.md").read_text("utf-8")
MAIN = (ROOT / "infra" / "main.bicep").read_text("utf-8")
PARAMETERS = (ROOT / "infra" / "main.parameters.json").read_text("utf-8")


def _section(title: str) -> str:
    start = PAGE.index(f"\n## {title}")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start : end if end > 0 else None]


def _shell_blocks(text: str) -> list[list[str]]:
    """The commands of each ```bash block (comments and blank lines left out)."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [
        [
            line.split("  #")[0].strip()
            for line in b.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        for b in blocks
    ]


def test_the_numbered_steps_come_in_order() -> None:
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", PAGE, re.M)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 6


def test_step_one_sets_only_parameters_azd_reads_before_azd_up() -> None:
    (commands,) = _shell_blocks(_section("1. Azure"))
    assert commands[0].startswith("az login") and commands[1].startswith("azd env new")
    assert commands[-1] == "azd up"
    settings = [c.split()[3] for c in commands if c.startswith("azd env set")]
    assert len(settings) == len(commands) - 3, "between azd env new and azd up: only azd env set"
    for name in settings:
        assert re.search(rf"\$\{{{name}[=}}]", PARAMETERS), f"{name} is no parameter of main.parameters.json"
    # The documents come first: without them no indexing job is made. No secret is asked for them.
    assert settings[0] == "AZURE_SHAREPOINT_SITE" and not [s for s in settings if s.startswith("GRAPH_")]


def test_every_value_read_back_is_an_output_of_the_template() -> None:
    outputs = set(re.findall(r"^output (\w+) ", MAIN, re.M))
    read = set(re.findall(r"azd env get-value (\w+)", PAGE))
    assert read and read <= outputs, read - outputs


def test_local_debugging_runs_in_a_working_order() -> None:
    local = PAGE[PAGE.index("**Local debugging with the toolkit**") : PAGE.index("## 4. What to check")]
    steps = re.findall(r"^(\d)\. (.*?)(?=^\d\. |\Z)", local, re.M | re.S)
    assert [int(n) for n, _ in steps] == list(range(1, len(steps) + 1))
    order = [
        "devtunnel host",
        "env/.env.local",
        "atk provision --env local",
        "atk deploy --env local",
        "./run.sh",
    ]
    assert [next(i for i, (_, text) in enumerate(steps) if key in text) for key in order] == list(range(5))
    # What env/.env.local must hold is what m365agents.local.yml reads and no step writes.
    (block,) = _shell_blocks(local)
    written = {line.split("=")[0] for line in block}
    toolkit = (ROOT / "m365agents.local.yml").read_text("utf-8") + (
        ROOT / "infra" / "botRegistration" / "azurebot.parameters.json"
    ).read_text("utf-8")
    read = set(re.findall(r"\$\{\{(\w+)\}\}", toolkit))
    made = set(re.findall(r"^\s{6}\w+: (\w+)$", toolkit, re.M)) | {"TEAMSFX_ENV", "APP_VERSION"}
    assert read - made <= written, (read - made) - written
