"""User mistakes at the command line end in a message to act on, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_probe import cli
from grpo_probe.rollout.table import read_rollout_table

from .envs.user_envs import factory_name, make_noise_policy

REPO = Path(__file__).resolve().parents[1]


def test_a_missing_design_lists_the_designs_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["prereg", "check", "prereg/no_such_design.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("grpo-probe: error: prereg/no_such_design.yaml: no such design file")
    assert "prereg/smoke.yaml" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["decide", "estimate", "verify", "rollout", "prereg"])
def test_every_command_describes_itself_and_its_examples_exist(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = cli.build_parser()
    action = next(a for a in parser._actions if getattr(a, "choices", None))
    sub = action.choices[command]
    assert sub.description or command == "prereg", f"grpo-probe {command} has no description"
    text = sub.format_help()
    for example in [w.strip(",.()") for w in text.split() if w.startswith("results/")]:
        assert "<" in example or "/smoke/" in example or example.endswith("/"), (command, example)


def test_rollout_rows_take_the_designs_run_key_by_default(tmp_path: Path) -> None:
    def rows(*extra: str) -> list[dict]:
        out = tmp_path / f"rows{len(list(tmp_path.iterdir()))}.parquet"
        argv = ["rollout", "--arm", "a", "--factory", factory_name(make_noise_policy), "--seeds", "0"]
        argv += ["--prereg", str(REPO / "prereg/smoke.yaml"), *extra, "--out", str(out)]
        assert cli.main(argv) == 0
        return read_rollout_table(out).to_pylist()

    default = rows()
    assert default == rows("--run-key", "7")  # smoke.yaml's run_key
    assert default != rows("--run-key", "0")


HEAVY_FOR_HELP = (
    "jinja2",
    "jsonschema",
    "matplotlib",
    "mujoco",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "torch",
)
"""What ``grpo-probe --help`` must not import: each costs tens of milliseconds or more to load."""
LIGHT_FOR_HELP = frozenset(
    {
        "grpo_probe.cli",
        "grpo_probe.atomic_io",
        "grpo_probe.lazy_exports",
        "grpo_probe.compute.accounting",
        "grpo_probe.provenance.machine",
        "grpo_probe.render_setup",
        "grpo_probe.numerics",
    }
)
"""The package's own modules, other than packages and ``*_command`` modules, that building a command's
parser may import: each is standard library only (``grpo_probe.envs`` picks the headless OpenGL backend
with ``render_setup`` on import; the command line applies ``numerics`` before any command loads)."""


def _loaded_after(*argv: str) -> dict[str, bool]:
    """Every module ``grpo-probe *argv`` loaded (name -> whether it is a package), in a fresh interpreter:
    this test process has long since loaded everything."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from grpo_probe.cli import main\n"
        f"try:\n    main({list(argv)!r})\nexcept SystemExit as exit:\n    assert exit.code == 0, exit.code\n"
        "print(json.dumps({m: hasattr(v, '__path__') for m, v in sorted(sys.modules.items())}))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "usage: grpo-probe" in run.stdout
    return json.loads(run.stdout.splitlines()[-1])


def test_help_imports_no_area_neither_the_analysis_stack_nor_torch() -> None:
    """``grpo-probe --help`` lists the commands from ``cli.COMMANDS``: no area module, no analysis package
    (nor its pyarrow, matplotlib or jinja2), nothing but the command line module itself and the numerics
    setting it applies first (standard library only)."""
    loaded = _loaded_after("--help")
    assert sorted(m for m in HEAVY_FOR_HELP if m in loaded) == []
    found = sorted(m for m in loaded if m.startswith("grpo_probe"))
    assert found == ["grpo_probe", "grpo_probe.cli", "grpo_probe.numerics"]


@pytest.mark.parametrize(
    ("command", "area"),
    [("sim", "grpo_probe.envs.boat.demo_command"), ("decide", "grpo_probe.analysis.decide_command")],
)
def test_a_commands_help_imports_its_own_area_only(command: str, area: str) -> None:
    """The command modules register their parsers and import their implementations inside each handler;
    the packages they live in resolve their names lazily (PEP 562)."""
    loaded = _loaded_after(command, "--help")
    assert sorted(m for m in HEAVY_FOR_HELP if m in loaded) == []
    commands = sorted(m for m in loaded if m.endswith("_command"))
    assert commands == [area]
    modules = {m for m, package in loaded.items() if m.startswith("grpo_probe.") and not package}
    implementation = sorted(m for m in modules - LIGHT_FOR_HELP if not m.endswith("_command"))
    assert implementation == [], f"grpo-probe {command} --help imports {implementation}"
    assert command == "decide" or "grpo_probe.analysis" not in loaded


def test_the_command_table_is_what_the_areas_register() -> None:
    """``--help`` shows ``cli.COMMANDS``' help lines without importing the areas: they must be the ones
    each area registers, in the same order, and each command must come from the module the table names."""
    import argparse
    import importlib

    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    registered = [(choice.dest, choice.help) for choice in action._choices_actions]
    assert registered == [(name, help_line) for name, _, help_line in cli.COMMANDS]
    for module in cli.COMMAND_MODULES:  # each module adds the commands the table gives it
        alone = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(alone)
        assert list(alone.choices) == [name for name, m, _ in cli.COMMANDS if m == module], module


def test_no_help_text_shows_restructuredtext_markup() -> None:
    """Help texts come partly from docstrings; a terminal shows ``x`` literally, so none may carry it."""
    import argparse

    def helps(parser: argparse.ArgumentParser, name: str):
        yield name, parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from helps(sub, f"{name} {sub_name}")

    found = [(name, text) for name, text in helps(cli.build_parser(), "grpo-probe")]
    assert len(found) > 10
    assert [name for name, text in found if "``" in text] == []
