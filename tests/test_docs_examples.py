"""docs/extending.md's worked examples, copied verbatim into a fresh copy of the repository, pass the tests
that cover what they change.

Why: the examples once used the names of the tests' own toys, so a reader who followed them got failing
tests (1, 6 and 2 of them), a new guard needed a test edit the page did not mention, and the worked read
broke the first-screen test, which the page did not name. Every example here is taken from the page as a
reader would take it and applied to one copy of the repository; the tests the sections name run in that
copy, with the copy's ``src`` first on the path, and the files the examples touched are ruff-clean. A
section names at least every test file that imports a module its examples edit
(:func:`touched_tests.direct_tests`), which is checked here without running anything.

The tests an example touches are more than those: every test file that imports an edited module or a
module of the package that imports one (:func:`touched_tests.touched_tests`: the schema, the page, the
heads). Asked with ``GRPO_PROBE_DOCS_EXAMPLES=1`` (``.ci/run`` asks), all of those files run in the copy,
the workflow runs among them; without it, the test files the examples write do (the other named files
and the workflow runs, ``e2e``, left to the asked run).

The page marks what to copy. A fenced block whose info string carries ``title="<path>[, <where>]"`` is
a piece of code for the file ``<path>`` (the title is also what the site shows above the block):

- ``title="<path>"`` for a file that is not in the repository: a new file, the block its whole text; for
  a file that is, the block is quoted from it (the page shows real code, and this checks it still is);
- ``title="<path>, at the end of NAME"``: an entry of the literal ``NAME`` opens (a module-level
  ``NAME = (``/``{`` or the ``return (`` of ``def NAME``), inserted before its closing bracket;
- ``title="<path>, at the bottom"``: appended to the file.

A ``## `` section with an example to apply carries ``<!-- example tests: <test file> ... -->``: the test
files to run once its examples are in.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from touched_tests import direct_tests, touched_tests
from workflow_copies import copy_repo

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"

pytestmark = pytest.mark.slow  # a copy of the repository and a pytest process in it: a minute or two

ASKED = "GRPO_PROBE_DOCS_EXAMPLES"
SERVICE_ASKS = frozenset(
    f"GRPO_PROBE_{ask}" for ask in ("SLURM", "BROWSER", "LEROBOT_VENV", "SIM_VENV", "CPU_EMULATION")
)
"""Asks the copy's pytest does not inherit (nor this run's worker, its ``PYTEST_`` variables). The tests
they ask for need what only the checkout has (the ``.venv`` docs/lerobot.md names, the ``.venvs/`` built
for served simulators, a running scheduler), so they run once, on the tree as committed; in the copy, with
its examples (a read, a scene, a loss, a sampler) applied, they skip as on any machine that did not ask."""
"""Set to 1 to run every test file the examples touch, not only those the page names (see the docstring)."""

FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
TITLE = re.compile(r'title="(?P<path>[^",]+)(?:, (?P<where>[^"]+))?"')
END_OF = re.compile(r"at the end of (?P<name>[A-Za-z_][A-Za-z0-9_]*)")
TESTS = re.compile(r"<!-- example tests: (?P<files>[^>]*?) -->")


@dataclass(frozen=True)
class Example:
    """One titled block of the page: the file it is for, where in it, and its code (dedented)."""

    section: str
    path: str
    where: str | None
    code: str


@dataclass(frozen=True)
class Section:
    """A ``## `` section of the page: its examples and the test files they are checked with."""

    heading: str
    examples: tuple[Example, ...]
    tests: tuple[str, ...]


def page_sections(text: str) -> list[Section]:
    """The page's ``## `` sections that hold at least one titled block, in page order."""
    sections = []
    for chunk in re.split(r"^(?=## )", text, flags=re.M):
        if not chunk.startswith("## "):
            continue
        heading = chunk.splitlines()[0][3:].strip()
        examples = tuple(
            Example(heading, title["path"], title["where"], textwrap.dedent(fence["body"]))
            for fence in FENCE.finditer(chunk)
            if (title := TITLE.search(fence["info"]))
        )
        tests = tuple(f for m in TESTS.finditer(chunk) for f in m["files"].split())
        if examples:
            sections.append(Section(heading, examples, tests))
    return sections


def _closing_line(lines: list[str], name: str, path: str) -> int:
    """The index of the line that closes the literal ``name`` opens (see the module docstring)."""
    start = next(
        (i for i, line in enumerate(lines) if re.match(rf"(def {name}\(|{name}\s*[:=])", line)),
        None,
    )
    if start is None:
        raise ValueError(f"{path}: no definition of {name!r} to add to")
    opening = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith(("(", "{", "[")))
    indent = len(lines[opening]) - len(lines[opening].lstrip())
    for i in range(opening + 1, len(lines)):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) == indent and line.strip()[0] in ")}]":
            return i
    raise ValueError(f"{path}: the literal {name!r} opens at line {opening + 1} and never closes")


def apply_example(root: Path, example: Example) -> None:
    """Apply one example to the repository copy at ``root`` as the page tells a reader to."""
    target = root / example.path
    if example.where is None:
        if target.exists():
            raise ValueError(f"{example.path}: exists; a block titled with a bare path is a new file")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(example.code, encoding="utf-8")
        return
    text = target.read_text(encoding="utf-8")
    if example.where == "at the bottom":
        target.write_text(text.rstrip("\n") + "\n" + example.code, encoding="utf-8")
        return
    found = END_OF.fullmatch(example.where)
    if found is None:
        raise ValueError(f"{example.path}: unknown place {example.where!r} (see tests/test_docs_examples.py)")
    lines = text.splitlines(keepends=True)
    close = _closing_line(lines, found["name"], example.path)
    indent = " " * (len(lines[close]) - len(lines[close].lstrip()) + 4)
    lines[close:close] = [textwrap.indent(example.code, indent)]
    target.write_text("".join(lines), encoding="utf-8")


def _sections() -> list[Section]:
    return page_sections(PAGE.read_text(encoding="utf-8"))


def _to_apply(section: Section) -> list[Example]:
    return [e for e in section.examples if e.where is not None or not (REPO / e.path).exists()]


def test_the_page_marks_its_examples_and_each_section_names_its_tests() -> None:
    sections = _sections()
    headings = [s.heading for s in sections if _to_apply(s)]
    assert headings == ["A read", "A sampler", "A guard", "A phase-2 policy loss", "An advantage estimator"]
    for section in sections:
        if _to_apply(section):
            assert section.tests, f"docs/extending.md: section {section.heading!r} names no example tests"
        missing = [t for t in section.tests if not (REPO / t).is_file() and not _written_by(section, t)]
        assert missing == [], f"{section.heading}: example tests that are not in the repository: {missing}"


def _written_by(section: Section, path: str) -> bool:
    return any(e.path == path and e.where is None for e in section.examples)


def test_each_section_names_every_test_that_imports_what_its_examples_edit() -> None:
    for section in _sections():
        edited = {e.path for e in _to_apply(section)}
        unnamed = sorted(set(direct_tests(REPO, edited)) - set(section.tests))
        assert unnamed == [], (
            f"docs/extending.md: section {section.heading!r} edits {sorted(edited)}, which these tests "
            f"import; name them in its <!-- example tests: --> line: {unnamed}"
        )


def test_the_tests_an_edit_touches_are_its_importers_and_their_readers_importers(tmp_path: Path) -> None:
    files = {
        "src/grpo_probe/__init__.py": "",
        "src/grpo_probe/table.py": "TABLE = {}\n",
        "src/grpo_probe/reader.py": "from grpo_probe.table import TABLE\n",
        "src/grpo_probe/page.py": "from grpo_probe import reader\n",
        "src/grpo_probe/other.py": "X = 1\n",
        "tests/analysis/__init__.py": "",
        "tests/analysis/helper.py": "from grpo_probe.reader import *\n",
        "tests/analysis/test_via_helper.py": "from .helper import *\n",
        "tests/test_table.py": "import grpo_probe.table\n",
        "tests/test_reader.py": "from grpo_probe import reader\n",
        "tests/test_page.py": "from grpo_probe.page import *\n",
        "tests/test_other.py": "from grpo_probe.other import X\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    edit = ["src/grpo_probe/table.py"]
    assert direct_tests(tmp_path, edit) == ("tests/test_table.py",)
    assert touched_tests(tmp_path, edit) == (
        "tests/analysis/test_via_helper.py",
        "tests/test_reader.py",
        "tests/test_table.py",
    )


def test_a_quoted_block_is_still_the_code_it_quotes() -> None:
    """A block titled with a file that is in the repository is quoted from it, verbatim."""
    quoted = [e for s in _sections() for e in s.examples if e.where is None and (REPO / e.path).exists()]
    assert {e.path for e in quoted} >= {"examples/labpolicies/ddim.py", "examples/labpolicies/ddim_flow.py"}
    stale = [e.path for e in quoted if e.code.strip() not in (REPO / e.path).read_text(encoding="utf-8")]
    assert stale == []


def test_applying_an_example_inserts_it_where_the_title_says(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('NAMES = (\n    "a",\n)\n\n\ndef listed():\n    return (\n        1,\n    )\n')
    apply_example(tmp_path, Example("s", "m.py", "at the end of NAMES", '"b",\n'))
    apply_example(tmp_path, Example("s", "m.py", "at the end of listed", "2,\n"))
    apply_example(tmp_path, Example("s", "m.py", "at the bottom", "LAST = 3\n"))
    namespace: dict = {}
    exec(module.read_text(), namespace)
    assert namespace["NAMES"] == ("a", "b") and namespace["listed"]() == (1, 2) and namespace["LAST"] == 3
    with pytest.raises(ValueError, match="no definition of 'MISSING'"):
        apply_example(tmp_path, Example("s", "m.py", "at the end of MISSING", "x\n"))
    with pytest.raises(ValueError, match="exists"):
        apply_example(tmp_path, Example("s", "m.py", None, "x\n"))


def _applied(copy: Path, examples: list[Example]) -> dict[str, str]:
    """Apply ``examples`` to the copy, and commit it as a clone's first commit (the tests that copy the
    repository again, for a workflow run, list its files with git); the environment a pytest there runs
    in (the copy's package first), once the files they touched are checked to be ruff-clean."""
    for example in examples:
        apply_example(copy, example)
    for git in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the examples applied"]):
        subprocess.run(
            ["git", "-c", "user.name=examples", "-c", "user.email=examples@localhost", *git],
            cwd=copy,
            capture_output=True,
            check=True,
        )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k not in SERVICE_ASKS},
        "PYTHONPATH": os.pathsep.join(filter(None, [str(copy / "src"), os.environ.get("PYTHONPATH")])),
    }
    where = subprocess.run(
        [sys.executable, "-c", "import grpo_probe; print(grpo_probe.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(copy / "src"), where  # the copy's package, examples included
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", *sorted({e.path for e in examples})],
        cwd=copy,
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, f"{sorted({e.section for e in examples})}: not ruff-clean\n{lint.stdout}"
    return env


def _pytest(copy: Path, env: dict[str, str], args: list[str], timeout: int) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *args],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"{' '.join(args)}\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}"


def test_every_example_copied_verbatim_passes_the_tests_it_touches(tmp_path: Path) -> None:
    """The page's examples all applied to one copy, as a reader who followed each would have them (one
    copy, not one per section: the sections name several files in common); then the test files the
    examples themselves write, or, asked, every test file the examples touch, the tests the sections name
    and the workflow runs among them, on two workers. The named files but the examples' own take two to
    three minutes more on one worker, and each already runs unchanged in the suite, so a newcomer's
    ``bin/test`` leaves them, with the examples applied, to the asked run CI makes."""
    examples = [e for s in _sections() for e in _to_apply(s)]
    named = list(dict.fromkeys(t for s in _sections() if _to_apply(s) for t in s.tests))
    copy = copy_repo(tmp_path / "repo")
    env = _applied(copy, examples)
    if os.environ.get(ASKED) != "1":
        own = [t for t in named if t in {e.path for e in examples}]
        assert own, "the examples write no test file of their own"
        _pytest(copy, env, ["-m", "not e2e", *own], timeout=900)
        return
    touched = touched_tests(copy, {e.path for e in examples})
    assert set(touched) >= set(named), sorted(set(named) - set(touched))
    _pytest(copy, env, ["-n", "2", "--dist", "loadfile", "--no-loadscope-reorder", *touched], timeout=3600)
