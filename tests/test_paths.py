"""Every repository path the reader is pointed at exists: no stale pointer in the docs, the README, the run
settings, the designs' comments, the workflow or the commands.

Why: a moved file leaves its old path in prose, where no import or test would notice (five files pointed
at a schemas folder that had moved into the package). The paths are read off the text as a reader would
follow them, from the repository root.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from grpo_probe.prereg.moved import MOVES_FILE, read_moves

REPO = Path(__file__).resolve().parents[1]

TOP = (
    "workflow",
    "config",
    "prereg",
    "src",
    "docs",
    "tests",
    "benchmarks",
    "tools",
    "examples",
    "bin",
    "profiles",
)
PATH = re.compile(rf"(?<![\w./@$-])((?:{'|'.join(TOP)})/[A-Za-z0-9_./-]*[A-Za-z0-9_])(?![<*{{])")
"""A repository-relative path: a top-level folder, then path characters (a glob or a placeholder such as
``results/<design>`` or ``prereg/*.yaml`` is no path to follow)."""

READ = ("README.md", "mkdocs.yml", ".ci/run", "docs/", "config/", "prereg/", "workflow/", "profiles/", "bin/")
"""What a reader follows paths from (the package's and the tests' own strings name files relative to other
folders, or the files a test writes)."""

EXAMPLES = {
    "prereg/mine.yaml",
    "prereg/mine.yaml.lock",
    "prereg/designs/smoke/mine.yaml",
    "prereg/aloha.yaml",
    "prereg/my_design.yaml",
    "prereg/p.yaml",
    "prereg/pusht_lerobot.yaml",
    "prereg/x.yaml",
    "prereg/smooth_plane_gradients.yaml",
    "src/grpo_probe/policies/flow_midpoint.py",
    "tests/policies/test_flow_midpoint.py",
    "tests/analysis/test_boat_tilted_guard.py",
    "tests/phase2/test_clip_symmetric.py",
    "tests/phase2/test_dr_grpo.py",
}
"""Files the docs ask the reader to write (a design of their own, docs/extending.md's worked examples)."""


def _read_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    names = [
        n
        for n in listed.split("\0")
        if n and (n in READ or n.startswith(tuple(r for r in READ if r.endswith("/"))))
    ]
    return [REPO / n for n in names if (REPO / n).is_file() and not n.endswith((".lock", ".png", ".parquet"))]


def _as_it_was(path: Path) -> bool:
    """Whether ``path``'s text may name a registered file where it lay when the text was written: the
    changelog (history), the index of moves (its old paths) and a locked design, whose bytes are what its
    results hashed, so a move (prereg/MOVED.yaml) leaves its comments as they were."""
    rel = path.relative_to(REPO).as_posix()
    return (
        rel in {"docs/changelog.md", MOVES_FILE.as_posix()} or path.with_name(path.name + ".lock").is_file()
    )


def test_every_path_a_reader_is_pointed_at_exists() -> None:
    files = _read_files()
    assert any(f.name == "README.md" for f in files) and any(f.suffix == ".smk" for f in files)
    moves = read_moves(REPO)
    stale = sorted(
        f"{f.relative_to(REPO)}: {found}"
        for f in files
        for found in set(PATH.findall(f.read_text(encoding="utf-8")))
        if found not in EXAMPLES
        and not (REPO / found).exists()
        and not (_as_it_was(f) and (REPO / moves.current(found)).exists())
    )
    assert stale == []


def test_only_the_text_that_keeps_its_bytes_may_name_a_moved_file_s_old_path() -> None:
    """A page that still named an old path would send its reader to a missing file; a moved design's own
    comments may, since editing them would change the bytes its results recorded."""
    moves = read_moves(REPO)
    old, new = next(iter(moves.moved.items()))
    assert not (REPO / old).exists() and (REPO / new).exists()
    assert _as_it_was(REPO / new) and _as_it_was(REPO / MOVES_FILE)
    assert not _as_it_was(REPO / "docs/designs.md") and not _as_it_was(REPO / "prereg/README.md")


def test_the_pattern_finds_a_stale_path_and_skips_placeholders() -> None:
    text = (
        "see workflow/schemas/config.schema.yaml, results/<design>/x, prereg/*.yaml and src/grpo_probe/cli.py"
    )
    assert PATH.findall(text) == ["workflow/schemas/config.schema.yaml", "src/grpo_probe/cli.py"]


PACKAGE = REPO / "src" / "grpo_probe"
WRITTEN = {"prereg/check.manifest.json", "prereg/served_env.json"}
"""Files the package writes, not cites: the root manifest of ``grpo-probe prereg check --manifest``, and a
results folder's record of its served simulator (``results/<design>/prereg/served_env.json``)."""


def _stale_in_the_package() -> list[str]:
    """Each path of the repository the package's own text (comments, docstrings, schemas, templates) names
    that exists neither from the repository root nor from the package's root (``prereg/design.py`` is
    ``src/grpo_probe/prereg/design.py``), a file the package writes or one the docs ask a reader to write."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "src"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    stale = []
    for name in filter(None, listed.split("\0")):
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):  # a figure, a checkpoint
            continue
        stale += [
            f"{name}: {found}"
            for found in set(PATH.findall(text))
            if found not in EXAMPLES | WRITTEN
            and not (REPO / found).exists()
            and not (PACKAGE / found).exists()
        ]
    return sorted(stale)


def test_every_path_the_package_names_exists() -> None:
    """The .md citations are checked in tests/test_docs_site.py; this covers every other file the package
    points a reader at (a module, a schema, a rule, a tool)."""
    assert _stale_in_the_package() == []
