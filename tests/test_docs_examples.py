"""docs/extending.md's worked examples, copied verbatim into a fresh copy of the repository, pass the tests
that cover what they change.

Why: the examples once used the names of the tests' own toys, so a reader who followed them got failing
tests (1, 6 and 2 of them), and a new guard needed a test edit the page did not mention. Each example
here is taken from the page as a reader would take it and applied to a copy; the tests its section names
run in that copy, with the copy's ``src`` first on the path, and the files it touched are ruff-clean.

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

from workflow_copies import copy_repo

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"

pytestmark = pytest.mark.slow  # a copy of the repository and a pytest process per section: about a minute

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


@pytest.mark.parametrize("heading", [s.heading for s in _sections() if _to_apply(s)])
def test_an_example_copied_verbatim_passes_its_tests(heading: str, tmp_path: Path) -> None:
    section = next(s for s in _sections() if s.heading == heading)
    copy = copy_repo(tmp_path / "repo")
    for example in _to_apply(section):
        apply_example(copy, example)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},  # not this run's worker
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
        [sys.executable, "-m", "ruff", "check", "--no-cache", *sorted({e.path for e in _to_apply(section)})],
        cwd=copy,
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, f"{heading}: the example's code is not ruff-clean\n{lint.stdout}"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *section.tests],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, (
        f"{heading}: {' '.join(section.tests)}\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}"
    )
