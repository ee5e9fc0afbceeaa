"""The probe's numeric chain writes the same bytes on another processor: an emulated Intel Haswell.

Why: the machine that checks a result is not the one that made it. ``tools/cross_cpu/chain.py`` runs the
chain the workflow's jobs run (the scripted expert's demos in MuJoCo, behaviour cloning of the AR and flow
arms, each head's sampled rollouts) once natively and once under ``qemu-x86_64 -cpu Haswell-v4``: an Intel
processor with AVX2 and FMA and without AVX-512, whose CPUID every library then reads. PyTorch's
dispatcher, MKL (which picks its paths by vendor as well as by instruction set), oneDNN, numpy, OpenBLAS,
Arrow and glibc's libm all choose their kernels for that processor, as they would on a lab's older Intel
machine. With the numerics setting (grpo_probe.numerics) the two runs must agree byte for byte; the
emulator's CPU is checked first to be what it claims (AVX2 and FMA, no AVX-512): on a machine with
AVX-512, such as the project's, every library's widest kernels differ between the two runs.

It takes about five minutes (the emulator runs the chain some ten times slower), so it runs when asked:
``GRPO_PROBE_CPU_EMULATION=1`` (`.ci/run` sets it), installing Debian's qemu-user as root if missing
(tools/cross_cpu/install-qemu.sh).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from asked_tools import asked_tool
from grpo_probe import numerics

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
EMULATED_CPU = "Haswell-v4"
"""QEMU's model of an Intel Haswell (no TSX, with IBRS): AVX2 and FMA, no AVX-512, vendor GenuineIntel."""

_FEATURES = (
    "import json; from numpy._core._multiarray_umath import __cpu_features__ as f; "
    "print(json.dumps({k: f[k] for k in ('AVX2', 'FMA3', 'AVX512F')}))"
)


def _qemu() -> str:
    if not numerics.cpu_supports():
        pytest.skip("the numerics setting needs x86-64 with AVX2 and FMA")
    return asked_tool(
        "GRPO_PROBE_CPU_EMULATION", "qemu-x86_64", "tools/cross_cpu/install-qemu.sh", "cross-CPU test"
    )


def _run(command: list[str], timeout: int) -> str:
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{command[:4]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout.strip().splitlines()[-1]


def test_the_chain_writes_the_same_bytes_on_an_emulated_intel_haswell(tmp_path: Path) -> None:
    qemu = _qemu()
    emulated = [qemu, "-cpu", EMULATED_CPU, sys.executable]
    here = json.loads(_run([sys.executable, "-c", _FEATURES], 60))
    there = json.loads(_run([*emulated, "-c", _FEATURES], 300))
    assert there == {"AVX2": True, "FMA3": True, "AVX512F": False}, there
    assert here["AVX2"] and here["FMA3"]  # on a machine with AVX-512, the two differ in their widest kernels

    chain = [str(REPO / "tools/cross_cpu/chain.py")]
    native = json.loads(_run([sys.executable, *chain, str(tmp_path / "native")], 600))
    haswell = json.loads(_run([*emulated, *chain, str(tmp_path / "haswell")], 1500))
    assert native["setting"] == haswell["setting"] == numerics.SETTING
    assert native["torch_capability"] == haswell["torch_capability"] == "AVX2"
    assert len(native["files"]) == 5
    differing = sorted(k for k in native["files"] if native["files"][k] != haswell["files"].get(k))
    assert not differing, f"on an emulated {EMULATED_CPU} these files differ from this machine's: {differing}"
