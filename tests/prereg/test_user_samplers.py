"""A design registers sampling kinds of the lab's own (``samplers:``): the modules are imported before the
schema is checked, so their kinds are valid kinds, and a module that does not register one properly is
refused naming the design file, the field and the module."""

from __future__ import annotations

import pickle
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from grpo_probe.policies.checkpoint import OWN_FORMAT_CAPABILITIES
from grpo_probe.prereg import PreregError, load_prereg
from grpo_probe.prereg.run_design import load_run_design
from grpo_probe.prereg.schema import load_prereg_schema
from grpo_probe.sampling import SamplingMode, sampler, sampler_origin, sampling_kinds
from grpo_probe.user_code import module_files
from lab_samplers import DDIM_MODULE, EXAMPLES, ddim_cell, ddim_design, forget, registered

from .design_edits import edited, load_error

DECLARE = """from grpo_probe.sampling import SamplerKind, register_sampler


def declare(kind, head="flow", entry_module=__name__):
    return register_sampler(
        SamplerKind(kind, head=head, takes=("steps",), summary="a lab's test kind", entry_module=entry_module)
    )
"""


class Lab:
    """A lab package under a fresh name, written into the test's folder and importable from it; what its
    modules register is taken out of the registry when the test ends."""

    def __init__(self, root: Path) -> None:
        self.name = f"lab_{uuid.uuid4().hex[:8]}"
        self.folder = root / self.name
        self.folder.mkdir()
        (self.folder / "__init__.py").write_text("")
        (self.folder / "declare.py").write_text(DECLARE)

    def module(self, stem: str, body: str) -> str:
        """Write ``<package>/<stem>.py`` (``{lab}`` in ``body`` names the package); its dotted name."""
        (self.folder / f"{stem}.py").write_text(body.replace("{lab}", self.name))
        return f"{self.name}.{stem}"

    def kind(self, stem: str) -> str:
        """A kind name no other test registers."""
        return f"{stem}_{self.name}"


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    made = Lab(tmp_path)
    before = set(sampling_kinds())
    sys.path.insert(0, str(tmp_path))
    try:
        yield made
    finally:
        forget(tuple(k for k in sampling_kinds() if k not in before), made.name)
        sys.path.remove(str(tmp_path))


@pytest.fixture
def example_lab() -> Iterator[tuple[str, ...]]:
    """The example lab's ``labpolicies.ddim`` registered (its kind: ``ddim``)."""
    with registered(DDIM_MODULE, EXAMPLES) as kinds:
        yield kinds


def _with_samplers(tmp_path: Path, samplers: Any, cells: list[dict[str, Any]] | None = None) -> Path:
    def edit(raw: dict[str, Any]) -> None:
        raw["samplers"] = samplers
        raw["cells"] += cells or []

    return edited(tmp_path, "smoke.yaml", edit)


def test_a_design_naming_the_labs_module_validates_a_cell_of_its_kind(tmp_path: Path) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        prereg = load_prereg(ddim_design(tmp_path / "lab.yaml"), require_lock=False)
        assert prereg.samplers == (DDIM_MODULE,)
        assert prereg.sampler_modules == (DDIM_MODULE, "labpolicies.ddim_flow")
        cell = prereg.cell("c5_teacher_ddim")
        assert cell.mode == SamplingMode("ddim", sde_a=0.5, steps=10) and cell.head == "flow"
        assert cell.mode_text() == "ddim (sde_a=0.5, steps=10)"
        assert sampler_origin("ddim") == DDIM_MODULE
        assert "torch" not in sampler("ddim").entry_module  # the declaration names its math module

        # the kind is in the schema's enums, with its rules, and the schema is still a valid schema
        schema = load_prereg_schema()
        jsonschema.Draft202012Validator.check_schema(schema)
        assert "ddim" in schema["$defs"]["sampling_mode"]["properties"]["kind"]["enum"]
        assert "ddim" in schema["$defs"]["cell_kind"]["enum"]
        rule = next(
            r
            for r in schema["$defs"]["sampling_mode"]["allOf"]
            if r["if"]["properties"]["kind"]["const"] == "ddim"
        )
        assert rule["then"] == {
            "required": ["sde_a"],
            "properties": {"sde_a": {"maximum": 1.0}, "steps": {"minimum": 2}},
        }

        # its code is what every job reads besides the package: the lab's package files
        files = {p.as_posix() for p in module_files(prereg.sampler_modules)}
        assert {
            f"{EXAMPLES.as_posix()}/labpolicies/{n}" for n in ("__init__.py", "ddim.py", "ddim_flow.py")
        } <= {Path(f).resolve().as_posix() for f in files}
        # a policy of this package's format samples every kind of its head, the lab's included
        assert "ddim" in OWN_FORMAT_CAPABILITIES["flow"].kinds

        # the design registers the kind; the package alone does not
        forget(("ddim",), "labpolicies")
        assert "ddim" not in OWN_FORMAT_CAPABILITIES["flow"].kinds
        message = load_error(edited(tmp_path, "smoke.yaml", lambda raw: raw["cells"].append(ddim_cell())))
        assert "smoke.yaml: cells[c5_teacher_ddim].mode.kind: 'ddim' is not one of" in message
    finally:
        forget(("ddim",), "labpolicies")
        sys.path.remove(str(EXAMPLES))


def test_a_value_the_kind_does_not_allow_is_refused_by_the_schema(tmp_path: Path, example_lab: Any) -> None:
    message = load_error(_with_samplers(tmp_path, [DDIM_MODULE], [ddim_cell(eta=1.5)]))
    assert "smoke.yaml: cells[c5_teacher_ddim].mode.sde_a: 1.5 is greater than the maximum of 1.0" in message
    with pytest.raises(ValueError, match=r"SamplingMode.sde_a must be at most 1.0 for kind 'ddim', got 1.5"):
        SamplingMode("ddim", sde_a=1.5)
    message = load_error(_with_samplers(tmp_path, [DDIM_MODULE], [ddim_cell(steps=1)]))
    assert "smoke.yaml: cells[c5_teacher_ddim].mode.steps: 1 is less than the minimum of 2" in message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("import {lab}.nowhere\n", "failed to import: ModuleNotFoundError: No module named '{lab}.nowhere'"),
        (
            "raise RuntimeError('the lab cluster is down')\n",
            "failed to import: RuntimeError: the lab cluster is down",
        ),
        ("X = 1\n", "registers no sampling kind (call grpo_probe.sampling.register_sampler in it"),
        (
            "from {lab}.declare import declare\ndeclare('{kind}')\ndeclare('{kind}')\n",
            "registers kind '{kind}' twice",
        ),
        (
            "from {lab}.declare import declare\ndeclare('flow_sde')\n",
            "registers kind 'flow_sde', which is a built-in kind; choose another name",
        ),
        (
            "from {lab}.declare import declare\ndeclare('{kind}', head='diffusion')\n",
            "registers kind '{kind}', whose head 'diffusion' is not a policy's head (ar, flow)",
        ),
        (
            "from {lab}.declare import declare\ndeclare('{kind}', entry_module='{lab}.missing_math')\n",
            "registers kind '{kind}', whose entry_module '{lab}.missing_math' Python cannot find",
        ),
    ],
    ids=[
        "import-error",
        "raises",
        "registers-nothing",
        "twice",
        "built-in",
        "unknown-head",
        "no-entry-module",
    ],
)
def test_a_module_that_does_not_register_a_kind_is_refused_naming_file_field_and_module(
    tmp_path: Path, lab: Lab, body: str, expected: str
) -> None:
    kind = lab.kind("broken")
    module = lab.module("samplers", body.replace("{kind}", kind))
    kinds_before = sampling_kinds()
    path = _with_samplers(tmp_path, [module])
    message = load_error(path, PreregError)
    wanted = expected.replace("{lab}", lab.name).replace("{kind}", kind)
    assert f"{path}: samplers[0]: module {module!r} {wanted}" in message, message
    assert sampling_kinds() == kinds_before  # what the failed module registered is taken out again
    assert load_error(path, PreregError) == message  # asked again, the same answer


def test_a_kind_two_modules_register_is_refused_with_both_named(tmp_path: Path, lab: Lab) -> None:
    kind = lab.kind("shared")
    first = lab.module("first", f"from {{lab}}.declare import declare\ndeclare('{kind}')\n")
    second = lab.module("second", f"from {{lab}}.declare import declare\ndeclare('{kind}')\n")
    path = _with_samplers(tmp_path, [first, second])
    message = load_error(path, PreregError)
    assert (
        f"{path}: samplers[1]: module {second!r} registers kind {kind!r}, which module {first!r} registered"
        in message
    )


def test_the_field_must_be_a_list_of_module_names_each_listed_once(tmp_path: Path, lab: Lab) -> None:
    path = _with_samplers(tmp_path, "labpolicies.ddim")
    assert f"{path}: samplers: a list of module names" in load_error(path, PreregError)
    path = _with_samplers(tmp_path, ["labpolicies/ddim.py"])
    assert f"{path}: samplers[0]: module 'labpolicies/ddim.py' is not a module name" in load_error(
        path, PreregError
    )
    path = _with_samplers(tmp_path, ["grpo_probe.policies.flow_sde"])
    assert "is a module of grpo_probe itself, whose kinds are built in" in load_error(path, PreregError)
    module = lab.module("once", f"from {{lab}}.declare import declare\ndeclare('{lab.kind('once')}')\n")
    path = _with_samplers(tmp_path, [module, module])
    assert f"{path}: samplers[1]: {module!r} is listed twice (first at samplers[0])" in load_error(
        path, PreregError
    )


def test_the_workflows_first_read_lists_the_problem_once(tmp_path: Path, lab: Lab) -> None:
    """The workflow reads the design twice when it is invalid (every problem at once): same line, once."""
    module = lab.module("down", "raise RuntimeError('no licence server')\n")
    path = _with_samplers(tmp_path, [module])
    with pytest.raises(PreregError) as info:
        load_run_design(path, tmp_path / "results")
    lines = [line for line in str(info.value).splitlines() if "no licence server" in line]
    assert lines == [
        f"  - {path}: samplers[0]: module {module!r} failed to import: RuntimeError: no licence server"
    ]


def test_a_module_the_labs_code_imported_first_is_not_imported_again(tmp_path: Path, lab: Lab) -> None:
    kind = lab.kind("early")
    module = lab.module("early", f"from {{lab}}.declare import declare\ndeclare('{kind}')\n")
    __import__(module)  # the lab's own code (an adapter, a notebook) imported it before the design
    prereg = load_prereg(_with_samplers(tmp_path, [module]), require_lock=False)
    assert prereg.samplers == (module,) and sampler_origin(kind) == module


def test_a_mode_of_the_labs_kind_is_known_to_a_process_that_unpickles_it(example_lab: Any) -> None:
    """A rollout worker (spawn, forkserver) gets its mode pickled: the lab's module comes with it."""
    mode = SamplingMode("ddim", sde_a=0.25, steps=4)
    assert pickle.loads(pickle.dumps(mode)) == mode
    script = "import pickle, sys; m = pickle.loads(sys.stdin.buffer.read()); print(m.kind, m.head, m.sde_a)"
    worker = subprocess.run(
        [sys.executable, "-c", script],
        input=pickle.dumps(mode),
        capture_output=True,
        env={"PYTHONPATH": str(EXAMPLES), "PATH": ""},
        check=False,
        timeout=60,
    )
    assert worker.returncode == 0, worker.stderr.decode()
    assert worker.stdout.decode().split() == ["ddim", "flow", "0.25"]
