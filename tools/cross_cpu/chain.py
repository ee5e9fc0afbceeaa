"""The probe's numeric chain in one process, for comparing its bytes across CPUs: demos, training, rollouts.

Run by ``tools/cross_cpu/compare.py`` (natively and under an emulated CPU) and by ``tests/test_cross_cpu.py``:

    .venv/bin/python tools/cross_cpu/chain.py OUT [--prereg prereg/smoke.yaml]

On the registered smoke design it collects the scripted expert's demos (MuJoCo and the boat expert),
behaviour-clones the AR arm and the flow arm with their registered budgets (PyTorch: initialisation,
matmuls, attention, Adam), and runs K keyed rollouts of each head's sampler from the design's seeds (the AR
head's temperature sampling and the flow head's ODE draws, stepping MuJoCo), as the workflow's jobs do.
It prints one JSON object: the sha256 of every file written, the numerics setting in force and the CPU
capability PyTorch took, so two machines' runs compare file by file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from grpo_probe import numerics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the demos, checkpoints and tables into")
    parser.add_argument(
        "--prereg", default="prereg/smoke.yaml", help="the design (default: the smoke design)"
    )
    parser.add_argument(
        "--without-setting",
        action="store_true",
        help="leave the numerics setting out (each library takes this CPU's best path): the control",
    )
    args = parser.parse_args(argv)
    if not args.without_setting:
        numerics.apply(os.environ)  # as the workflow does for every job, before numpy or torch loads

    import torch

    from grpo_probe.cli import main as grpo_probe
    from grpo_probe.envs.demos import collect_env_demos
    from grpo_probe.prereg import load_prereg
    from grpo_probe.probe_jobs.prepare import train_registered_arm

    torch.set_num_threads(1)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    prereg = load_prereg(args.prereg)
    demos = out / "demos.npz"
    collect_env_demos(
        prereg.env, prereg.training.demo_seeds, prereg.training.demo_noise, prereg.run_key
    ).save(demos)
    seeds = f"{min(prereg.seeds)}-{max(prereg.seeds)}"
    for arm, sampling in (("ar", ["--ar-temperature", "1.0"]), ("flow_teacher", ["--flow-draws"])):
        checkpoint = out / f"{arm}.pt"
        train_registered_arm(prereg, arm, demos, checkpoint)
        draws = ["--draws", str(prereg.group_size)] if arm == "ar" else [str(prereg.group_size)]
        code = grpo_probe(
            [
                "rollout",
                "--arm",
                arm,
                "--checkpoint",
                str(checkpoint),
                "--seeds",
                seeds,
                *sampling,
                *draws,
                "--workers",
                "0",
                "--prereg",
                str(args.prereg),
                "--out",
                str(out / f"{arm}.parquet"),
            ]
        )
        if code:
            return code
    hashes = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.iterdir()) if p.is_file()
    }
    record = {
        "files": hashes,
        "setting": numerics.in_effect()["setting"],
        "torch_capability": torch.backends.cpu.get_cpu_capability(),
    }
    print(json.dumps(record, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
