"""The documentation site builds with ``mkdocs build --strict``, and every page in docs/ is in its nav.

Why: the pages are read on GitHub and as a site; a broken link or anchor, a page left out of the nav or
a nav entry without a page would pass unnoticed in either reader alone. ``--strict`` turns each of them
into a failure (mkdocs.yml's ``validation:``). Builds into a temporary folder, so nothing is left in the
checkout; about two seconds.
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
