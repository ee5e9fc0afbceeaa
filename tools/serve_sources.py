"""The package's sources that grpo-probe-serve ships, read from serve/pyproject.toml: one list for the tools
that build the serve distribution from a copy (tools/make_lerobot_venv.sh), that stamp a simulator venv with
the sources it installed (tools/make_sim_venv.sh) and for the tests that build it.

Why read and not written out: the distribution's ``[tool.setuptools]`` table (its packages and the
top-level modules shipped beside them) is the one place that says what it holds; a copy kept elsewhere
misses the next module added there. Prints one path a line, relative to the repository: each top-level
package's folder (its subpackages come with it), then each module's file.

    python tools/serve_sources.py         # src/grpo_probe/serve, src/grpo_probe/keyed_rng.py, ...
    python tools/serve_sources.py --files # every .py file among them, sorted (what a stamp hashes)
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def serve_sources(repo: Path = REPO) -> list[str]:
    """The folders of serve/pyproject.toml's top-level packages and the files of its modules, relative
    to ``repo``, in the order the table lists them."""
    setuptools = tomllib.loads((repo / "serve" / "pyproject.toml").read_text())["tool"]["setuptools"]
    root = (repo / "serve" / setuptools["package-dir"]["grpo_probe"]).resolve().relative_to(repo)
    packages = setuptools["packages"]
    top = [p for p in packages if not any(p.startswith(f"{q}.") for q in packages)]
    folders = [root.joinpath(*p.split(".")[1:]).as_posix() for p in top]
    modules = [f"{root.joinpath(*m.split('.')[1:]).as_posix()}.py" for m in setuptools["py-modules"]]
    return folders + modules


def serve_files(repo: Path = REPO) -> list[str]:
    """Every .py file the distribution ships from the package's sources, sorted."""
    found: set[str] = set()
    for source in serve_sources(repo):
        path = repo / source
        found.update(
            p.relative_to(repo).as_posix() for p in ([path] if path.is_file() else path.rglob("*.py"))
        )
    return sorted(found)


if __name__ == "__main__":
    print("\n".join(serve_files() if "--files" in sys.argv[1:] else serve_sources()))
