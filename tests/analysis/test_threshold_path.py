"""A rule's threshold is read in six modules of the package, no more (docs/layout.md, "A threshold's path").

Why a test: the registered bar of a condition (``chaos_share.upper <= 0.5``) once crossed twelve files under
five names on its way from the design to the page. It is now parsed once into a typed
:class:`grpo_probe.prereg.rule.Condition` that compares (:meth:`~grpo_probe.prereg.rule.Condition.compare`),
records and prints itself; the rule, the stability resampling and the operating simulation take the
condition and never see the number. This test reads the package's source and fails when another module
starts to read a condition's threshold itself, so the path stays short by construction, not by review.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grpo_probe

PACKAGE = Path(grpo_probe.__file__).parent

THRESHOLD_NAMES = {"threshold", "threshold_on", "threshold_read"}
"""A condition's threshold by every name it has: the number, its resolution on a cell's reads, and the read
a relative threshold scales."""

THE_PATH = {
    "prereg/rule.py": "parsed into a Condition; compared, recorded and printed by it",
    "prereg/cross_field.py": "a relative threshold's read checked against the vocabulary",
    "analysis/rule/decision_rule.py": "the verdict on one cell and its words",
    "analysis/error_rates/nulls.py": "the null scenario placed at the threshold",
    "analysis/page/summary_figures.py": "the rule figure's threshold line",
    "audit/across.py": "two decision records' clauses, compared across machines (a record, not the rule)",
}
"""Each module that reads a rule's threshold, and why it must (docs/layout.md lists the same six)."""


def _python_readers(path: Path) -> list[int]:
    """Lines of ``path`` that name a threshold: an attribute, a record key or a keyword argument."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        name = (
            node.attr
            if isinstance(node, ast.Attribute)
            else node.value
            if isinstance(node, ast.Constant)
            else node.arg
            if isinstance(node, ast.keyword)
            else None
        )
        if name in THRESHOLD_NAMES:
            lines.append(node.lineno)
    return sorted(lines)


def _template_readers(path: Path) -> list[int]:
    """Lines of a Jinja template whose expressions (not its prose) name a threshold."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"\{\{.*?\}\}|\{%.*?%\}", text, flags=re.DOTALL):
        if re.search(r"\bthreshold(_on|_read)?\b", match.group()):
            found.append(text.count("\n", 0, match.start()) + 1)
    return found


def threshold_readers() -> dict[str, list[int]]:
    """Every module and template of the package that reads a rule condition's threshold, with the lines.

    The environments are left out: a guard's ``threshold`` (``envs/protocol.py``) is the guard's own
    registered bar, declared by the environment beside the guard, not a clause of the decision rule.
    """
    found: dict[str, list[int]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("envs/"):
            continue
        if lines := _python_readers(path):
            found[rel] = lines
    for path in sorted(PACKAGE.rglob("*.j2")):
        if lines := _template_readers(path):
            found[path.relative_to(PACKAGE).as_posix()] = lines
    return found


def test_a_rule_threshold_is_read_in_six_modules_at_most():
    readers = threshold_readers()
    assert len(readers) <= 6, readers
    assert set(readers) == set(THE_PATH), (
        f"modules reading a rule's threshold: {sorted(readers)}; expected {sorted(THE_PATH)}. A new reader "
        "should take the Condition and call its compare(), to_record() or bar_text() instead"
    )


def test_the_scan_finds_a_threshold_read_where_there_is_one(tmp_path):
    """The scan is not blind: it finds each way a module can read a threshold, and skips prose."""
    module = tmp_path / "reader.py"
    module.write_text(
        "def f(condition, record, reads):\n"
        "    a = condition.threshold\n"
        "    b = record['threshold']\n"
        "    c = condition.threshold_on(reads)\n"
        "    return dict(threshold=a), b, c\n"
    )
    assert _python_readers(module) == [2, 3, 4, 5]
    template = tmp_path / "page.md.j2"
    template.write_text(
        "the threshold in prose\n{{ x.threshold | num }}\n{% if y.threshold_read %}{% endif %}\n"
    )
    assert _template_readers(template) == [2, 3]


def test_the_layout_page_names_the_same_modules():
    page = (PACKAGE.parents[1] / "docs" / "layout.md").read_text(encoding="utf-8")
    section = page.split("## A threshold's path", 1)[1]
    named = set(re.findall(r"`src/grpo_probe/([\w/]+\.py)`", section.split("\n## ", 1)[0]))
    assert named == set(THE_PATH)
