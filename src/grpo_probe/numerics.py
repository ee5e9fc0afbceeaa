"""One numerics setting for every job, so a run's bytes are the same on any x86-64 CPU with AVX2 and FMA.

Why: the numeric libraries pick their kernels at run time from the CPU they find. PyTorch's ATen kernels,
MKL's BLAS and vector maths, oneDNN, numpy's SIMD loops, OpenBLAS (numpy's and scipy's) and Arrow's compute
kernels each take an AVX-512 path on a machine that has it and an AVX2 path on one that does not, and the
two round differently (a reduction in 16 lanes sums in another order than one in 8; MKL's paths differ by
vendor too). Contact dynamics then amplify a 1e-7 difference in a trained weight into centimetres of
progress, so a design run on two CPUs gives two sets of tables. Each library has a documented switch that
fixes its path; :data:`VARIABLES` sets every one of them to the AVX2 level (x86-64-v3), which every x86-64
CPU with AVX2 and FMA runs the same way:

- ``ATEN_CPU_CAPABILITY=avx2``: PyTorch's CPU kernels (its DispatchStub) never take their AVX-512 versions.
- ``MKL_CBWR=COMPATIBLE``: MKL (PyTorch's BLAS and vector maths) runs one code path on Intel and AMD
  processors (its Conditional Numerical Reproducibility); its AVX2 path alone still differs by vendor.
- ``ONEDNN_MAX_CPU_ISA=AVX2``: oneDNN, PyTorch's convolutions.
- ``NPY_DISABLE_CPU_FEATURES=X86_V4 AVX512_ICL AVX512_SPR``: numpy runs its x86-64-v3 loops (its float32
  exp and log differ between the two).
- ``OPENBLAS_CORETYPE=Haswell``: numpy's and scipy's OpenBLAS take their AVX2 kernels.
- ``ARROW_USER_SIMD_LEVEL=AVX2``: Arrow's compute kernels.

Thread counts are not part of the setting: Snakemake sets each job's BLAS and OpenMP threads to its
rule's ``threads`` itself, PyTorch runs the project's training and decoding on one intra-op thread, and
the suite compares a job's bytes at every worker count it runs with (sequential and parallel).

What no variable reaches, and why it need not: MuJoCo is compiled for one instruction set and dispatches
nothing; glibc's libm picks its FMA versions of exp/log/sin/cos on every CPU with AVX2 and FMA, the same
ones on all of them (it has no AVX-512 variants of those functions); PyTorch's float32 ``sqrt`` is built
on the approximate ``rsqrt`` instruction, whose bits differ between vendors, so the project's own
optimiser takes its square root in float64 (:mod:`grpo_probe.policies.adam`). The cross-CPU check
(``tests/test_cross_cpu.py``, which runs the chain on emulated Intel and AMD processors) is what shows the
list is complete for the project's code.

The workflow applies the setting to its own environment when Snakemake reads the Snakefile, so every job,
local or on a cluster, inherits it whatever the user's shell sets; ``grpo-probe`` applies it before a
command imports numpy or torch. A machine without AVX2 and FMA (or not x86-64) runs natively: its bytes are
its own, and its manifests say so (setting ``native``). This module is the standard library only: the
Snakefile and the command line import it before any numeric library is loaded.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, MutableMapping
from pathlib import Path

__all__ = ["NATIVE", "SETTING", "VARIABLES", "apply", "cpu_supports", "in_effect", "setting_for"]

SETTING = "x86-64-v3"
"""The setting's name, as manifests and decision.md record it."""

NATIVE = "native"
"""The name recorded where the setting does not apply (or a job ran outside it): bytes are this machine's."""

VARIABLES: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
    "OPENBLAS_CORETYPE": "Haswell",
    "ARROW_USER_SIMD_LEVEL": "AVX2",
}
"""Every library switch the setting fixes, and its value (the module docstring's table says why)."""

_REQUIRED_FLAGS = frozenset({"avx", "avx2", "fma"})


def _cpu_flags(cpuinfo_path: str | os.PathLike[str] = "/proc/cpuinfo") -> frozenset[str]:
    try:
        text = Path(cpuinfo_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cpu_supports(
    machine: str | None = None, flags: frozenset[str] | None = None, cpuinfo_path: str = "/proc/cpuinfo"
) -> bool:
    """Whether this CPU can run the setting: x86-64 with AVX, AVX2 and FMA (an x86-64-v3 processor).

    On another CPU the variables would ask for instructions it lacks (PyTorch would stop at the first
    AVX2 kernel), so the setting is not applied there.
    """
    arch = (machine if machine is not None else platform.machine()).lower()
    if arch not in ("x86_64", "amd64"):
        return False
    return (flags if flags is not None else _cpu_flags(cpuinfo_path)) >= _REQUIRED_FLAGS


def setting_for(supported: bool) -> str:
    """The setting a machine runs under: :data:`SETTING` where the CPU supports it, else :data:`NATIVE`."""
    return SETTING if supported else NATIVE


def apply(environ: MutableMapping[str, str] | None = None, *, supported: bool | None = None) -> str:
    """Set every variable of the setting in ``environ`` (default: ``os.environ``); return the setting's name.

    Values already there are replaced: the setting is the run's, not the shell's, so a user's
    ``ATEN_CPU_CAPABILITY=avx512`` cannot change a job's bytes. Where the CPU cannot run the setting,
    nothing is set and :data:`NATIVE` is returned. Call it before numpy, torch or pyarrow is imported:
    each reads its variable once, when it loads.
    """
    target = os.environ if environ is None else environ
    if not (cpu_supports() if supported is None else supported):
        return NATIVE
    for name, value in VARIABLES.items():
        target[name] = value
    return SETTING


def in_effect(environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """What a manifest records: the setting's name if every variable holds its value, and the variables.

    ``setting`` is :data:`SETTING` only when the whole setting is in force; anything else (a job started
    outside the workflow, a variable changed by hand) records :data:`NATIVE`, with the values found, so
    an audit compares such a run's bytes with no other machine's.
    """
    env = os.environ if environ is None else environ
    found = {name: env.get(name) for name in VARIABLES}
    complete = all(found[name] == value for name, value in VARIABLES.items())
    return {"setting": SETTING if complete else NATIVE, "variables": found}
