"""docs/lerobot.md says what ``grpo-probe-serve lerobot`` takes: its commands parse, its flag table is the
command's flags, and the script, variables and tests it names exist.

Why: the page is how a lab serves a checkpoint without writing Python; a flag renamed in the code and
not on the page (or the other way round) leaves the lab a command that fails.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from grpo_probe.serve.lerobot.cli import PROG, build_parser

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "lerobot.md"


def _bash_lines() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)
    return [line.split(" #")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def _table_flags() -> set[str]:
    """The first cell of each row of the page's flag table (the one whose header is ``| flag |``)."""
    table = PAGE.read_text().split("| flag | default | what it sets |", 1)[1].split("\n\n", 1)[0]
    return {
        flag
        for row in table.splitlines()[2:]
        for flag in re.findall(r"`(--[a-z-]+|[A-Z_]+)`", row.split("|")[1])
    }


def _parser_flags() -> set[str]:
    flags = set()
    for action in build_parser()._actions:
        if action.option_strings:
            flags.update(s for s in action.option_strings if s.startswith("--") and s != "--help")
        else:
            flags.add(action.metavar or action.dest)
    return flags


def test_every_command_on_the_page_parses() -> None:
    commands = [line for line in _bash_lines() if re.match(r"\S*grpo-probe-serve lerobot ", line)]
    assert commands, "docs/lerobot.md shows no grpo-probe-serve lerobot command"
    parser = build_parser()
    for line in commands:
        words = shlex.split(line)
        assert Path(words[0]).name == "grpo-probe-serve" and words[1] == "lerobot", line
        args = parser.parse_args(words[2:])  # SystemExit (a failed test) on a flag the command lacks
        assert args.checkpoint and args.port >= 0, line


def test_the_flag_table_is_the_commands_flags() -> None:
    assert _table_flags() == _parser_flags()
    assert PROG == "grpo-probe-serve lerobot"


def test_every_flag_the_page_mentions_is_the_commands() -> None:
    text = PAGE.read_text().split("## 4.", 1)[0]  # sections 1 to 3: the command's own
    mentioned = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", text))
    assert mentioned <= _parser_flags(), mentioned - _parser_flags()


def test_the_script_variables_and_tests_the_page_names_exist() -> None:
    text = PAGE.read_text()
    script = REPO / "tools" / "make_lerobot_venv.sh"
    assert "tools/make_lerobot_venv.sh" in text and script.stat().st_mode & 0o111
    for variable in re.findall(r"`(GRPO_PROBE_LEROBOT_[A-Z_]+)", text):
        homes = [script, REPO / "tests" / "serve" / "test_lerobot_venv.py", REPO / ".ci" / "run"]
        assert any(variable in home.read_text() for home in homes), variable
    for path in re.findall(r"`((?:tests|tools|examples)/[\w/.]+\.(?:py|sh))`", text):
        assert (REPO / path).is_file(), path
