"""The documentation site builds with ``mkdocs build --strict``, and every page in docs/ is in its nav.

Why: the pages are read on GitHub and as a site; a broken link or anchor, a page left out of the nav or
a nav entry without a page would pass unnoticed in either reader alone. ``--strict`` turns each of them
into a failure (mkdocs.yml's ``validation:``). Builds into a temporary folder, so nothing is left in the
checkout; about two seconds. And every ``*.md`` file the sources, the designs and the pages name is one
in this repository (or a page a run writes), so a reader who follows a citation finds it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


class _ConfigLoader(yaml.SafeLoader):
    """SafeLoader that reads mkdocs.yml's ``!!python/name:`` tags as plain strings."""


_ConfigLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda loader, suffix, node: f"python/name:{suffix}"
)


def _nav_pages(entries: Any) -> list[str]:
    """Every page path a (nested) mkdocs nav names."""
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [page for entry in entries for page in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [page for value in entries.values() for page in _nav_pages(value)]
    return []


def _config() -> dict[str, Any]:
    return yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_ConfigLoader)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "reading-decision" / "index.html").is_file()


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = _config()
    assert config["docs_dir"] == "docs"
    assert config["theme"] == "material" or config["theme"]["name"] == "material"
    nav = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(set(nav)) == pages, (
        f"pages not in mkdocs.yml's nav: {sorted(set(pages) - set(nav))}; "
        f"nav entries without a page: {sorted(set(nav) - set(pages))}"
    )
    assert len(nav) == len(set(nav)), f"a page is in the nav twice: {nav}"
    assert nav[0] == "index.md"


def test_the_readmes_links_into_docs_resolve() -> None:
    """README.md's relative links into docs/ work on GitHub: each names a page that exists."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#[^)\s]*)?\)", readme)
    assert links, "README.md links no docs page"
    missing = sorted({link for link in links if not (REPO / link).is_file()})
    assert not missing, f"README.md links to docs pages that do not exist: {missing}"


CITED_PAGE = re.compile(r"(?<![\w./{}<>*-])((?:\.\./|[\w-]+/)*[\w-]+\.md)(?!\.?\w)")
"""A ``*.md`` file named in running text: ``docs/signal-or-chaos.md``, ``error-rates.md``,
``../docs/serving.md``; not ``{R}/decision.md``, ``snakemake.output.md`` or ``decision.md.j2``."""
CITING_FOLDERS = ("src", "workflow", "prereg", "docs", "config")
"""Where the project's own text is (the tests name scratch files such as ``a.md``)."""
STILL_CITED: dict[str, str] = {}
"""Citations of a missing page left in place for now, each to be replaced by the docs page that says the
same (docs/signal-or-chaos.md); the test fails once one is gone, so that its entry goes too."""


def _written_pages() -> set[str]:
    """The pages a run writes, read off the workflow's outputs (``f"{R}/compute.md"``,
    ``design_page("phase2")``): text that names them cites a result, not a file of the repository."""
    rules = "\n".join(
        p.read_text(encoding="utf-8")
        for p in [REPO / "workflow/Snakefile", *(REPO / "workflow/rules").glob("*.smk")]
    )
    outputs = set(re.findall(r"\{[A-Z]\}/([\w.]+\.md)\"", rules))
    outputs |= {f"{name}.md" for name in re.findall(r"(?:design|root)_page\(\"(\w+)\"\)", rules)}
    return outputs | set(COMMAND_PAGES)


COMMAND_PAGES = {"explore.md": "src/grpo_probe/study/explore.py"}
"""Pages a ``grpo-probe`` command writes into a results folder rather than a workflow rule (``study
explore``), with the module that writes each: text that names one cites a result too."""


def test_each_page_a_command_writes_is_named_by_the_module_that_writes_it() -> None:
    for page, module in COMMAND_PAGES.items():
        assert f'"{page}"' in (REPO / module).read_text(encoding="utf-8"), (page, module)


def _unresolved_citations(path: Path, text: str, written: set[str]) -> list[str]:
    """Each ``*.md`` ``text`` (the contents of ``path``) names that is neither a page a run writes nor a
    file found from the repository root, from ``path``'s folder or in docs/."""
    missing = []
    for cited in CITED_PAGE.findall(text):
        if cited in written or cited.startswith("results/"):
            continue
        if not any((base / cited).is_file() for base in (REPO, path.parent, DOCS)):
            missing.append(cited)
    return missing


def test_the_citation_check_finds_a_page_that_does_not_exist() -> None:
    written = _written_pages()
    assert {"decision.md", "compute.md", "phase2.md", "validation.md"} <= written
    text = "See docs/signal-or-chaos.md, error-rates.md; results/smoke/decision.md, {R}/compute.md, x.md.j2."
    assert _unresolved_citations(DOCS / "index.md", text, written) == []
    text = 'Replays (NOTES.md, "Signal or chaos"); see docs/no-such-page.md and decision.md.'
    assert _unresolved_citations(DOCS / "index.md", text, written) == ["NOTES.md", "docs/no-such-page.md"]


def test_every_md_file_the_sources_cite_exists() -> None:
    """A comment, docstring or page that points at a Markdown file points at one in this repository."""
    listed = subprocess.run(
        ["git", "ls-files", "--", *CITING_FOLDERS], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    this_file = Path(__file__).resolve()
    written = _written_pages()
    missing = []
    for name in listed:
        path = REPO / name
        if path == this_file or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:  # a figure or a checkpoint
            continue
        missing += [f"{name}: {cited}" for cited in _unresolved_citations(path, text, written)]
    assert len(listed) > 100
    left = [f"{name}: {cited}" for name, cited in STILL_CITED.items()]
    assert sorted(set(left) - set(missing)) == [], "no longer cited: drop these from STILL_CITED"
    missing = [entry for entry in missing if entry not in left]
    assert missing == [], "cited Markdown files that do not exist:\n" + "\n".join(missing)
