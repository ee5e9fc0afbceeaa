"""What reading a design costs a fresh process, and what the command line's start costs, side by side.

Run by hand (not in CI timing asserts):

    .venv/bin/python benchmarks/design_read_cost.py [--repeats 5]

Every workflow job, every ``snakemake`` start and every ``grpo-probe`` command reads the design: its YAML,
the schemas it is validated against, and each registered version's analysis sections. Three pairs, each
run in turn ``--repeats`` times, CPU seconds (user + system) with medians and ratios:

1. parsing every design and schema file under ``prereg/`` and the package with libyaml's parser (what
   ``read_yaml`` uses) against PyYAML's pure-Python parser under the same strict loader; the parsed
   values are checked equal;
2. ``load_prereg`` of every design as a fresh process does it (the schema validators' cache emptied
   first) against the same with the package's schemas checked against their metaschema as each
   validator is built (as they were until the test suite took that check over), against the same with
   the validators kept, as a process that reads the design twice does; all against the previous reader
   (pure-Python parser, schema checked at each validation), rebuilt here by swapping those two back in;
3. a fresh ``python -c`` that builds the ``grpo-probe`` parser (what every command does before its
   own work) against one that also imports the rollout engine and the study's jobs, which the parser
   used to import (torch, matplotlib).

The load average is printed before and after, since a shared machine slows both sides alike.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import yaml

from grpo_probe.prereg import canonical, load_prereg, schema
from measure import cpu_s, load_average

REPO = Path(__file__).resolve().parents[1]


_BUILD_VALIDATOR = schema._validator.__wrapped__
"""Building a validator, without the cache around it."""


def _checked_at_every_call(schema_json: str, shipped: bool):
    """The previous validation: the schema checked against its metaschema at every call."""
    return _BUILD_VALIDATOR(schema_json, False)


@functools.lru_cache(maxsize=16)
def _checked_once(schema_json: str, shipped: bool):
    """A validator built as before the suite checked the shipped schemas: checked, then cached."""
    return _BUILD_VALIDATOR(schema_json, False)


def _compare(name: str, sides: dict[str, Callable[[], object]], repeats: int) -> None:
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(repeats):
        for side, run in sides.items():
            start = cpu_s()
            run()
            cpu[side].append(cpu_s() - start)
    medians = {side: statistics.median(values) for side, values in cpu.items()}
    print(f"\n{name}")
    for side, values in cpu.items():
        print(f"  {side:>44}: CPU {medians[side]:6.3f} s [{min(values):.3f}, {max(values):.3f}]")
    first, *rest = list(sides)
    for side in rest:
        print(f"  {first} / {side}: {medians[first] / medians[side]:.2f}")


def _is_design(path: Path) -> bool:
    """A registered design, wherever under prereg/ it lies (prereg/README.md): its lock records its name
    (a study's or a calibration's lock records a format instead)."""
    lock = path.with_name(path.name + ".lock")
    return lock.is_file() and json.loads(lock.read_text(encoding="utf-8")).get("file") == path.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average before: {load_average()}")
    files = sorted(REPO.glob("prereg/**/*.yaml")) + sorted(REPO.glob("src/grpo_probe/**/*.schema.yaml"))
    designs = [p for p in files if _is_design(p)]
    pure = canonical.strict_loader(yaml.SafeLoader)
    for path in files:
        if canonical.read_yaml(path) != yaml.load(path.read_text(encoding="utf-8"), Loader=pure):
            raise SystemExit(f"{path}: the two parsers read different values")
    print(f"{len(files)} design and schema files: both parsers read the same values")

    def parse(loader: type) -> None:
        for path in files:
            yaml.load(path.read_text(encoding="utf-8"), Loader=loader)

    _compare(
        f"1. parse {len(files)} files",
        {"libyaml": lambda: parse(canonical._StrictLoader), "pure Python": lambda: parse(pure)},
        args.repeats,
    )

    def read_all(fresh: bool) -> None:
        for path in designs:
            if fresh:
                schema._validator.cache_clear()
            load_prereg(path)

    def read_all_schemas_checked() -> None:
        with mock.patch.object(schema, "_validator", _checked_once):
            read_all(fresh=True)

    def read_all_previous() -> None:
        with (
            mock.patch.object(canonical, "_StrictLoader", pure),
            mock.patch.object(schema, "_validator", _checked_at_every_call),
        ):
            read_all(fresh=False)

    _compare(
        f"2. load_prereg of {len(designs)} designs",
        {
            "as a fresh process (validators built)": lambda: read_all(fresh=True),
            "fresh, shipped schemas checked": read_all_schemas_checked,
            "validators kept": lambda: read_all(fresh=False),
            "previous reader (pure Python, schema checks)": read_all_previous,
        },
        args.repeats,
    )

    build = "from grpo_probe.cli import build_parser; build_parser()"
    previous = "import grpo_probe.rollout.engine, grpo_probe.study.jobs; " + build

    def fresh(code: str) -> Callable[[], None]:
        return lambda: subprocess.run([sys.executable, "-c", code], check=True)

    started = time.perf_counter()
    _compare(
        "3. a fresh process builds the grpo-probe parser",
        {"parser only": fresh(build), "parser + the imports it used to make": fresh(previous)},
        args.repeats,
    )
    print(f"  ({time.perf_counter() - started:.1f} s of wall time for part 3)")
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
