"""The chain's root and the reference arms: the prereg check, the expert's demos, behaviour cloning."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_json
from grpo_probe.compute.servers import server_reading
from grpo_probe.envs.demo_set import Demos
from grpo_probe.envs.demos import collect_env_demos
from grpo_probe.envs.observation import camera_of
from grpo_probe.envs.registry import env_spec
from grpo_probe.envs.served import SERVED_FACTORY
from grpo_probe.prereg import Prereg, load_prereg
from grpo_probe.prereg.env_check import check_built_environment
from grpo_probe.probe_jobs.binding import check_pin
from grpo_probe.probe_jobs.sources import PathLike
from grpo_probe.provenance import write_design_manifest

__all__ = ["demos", "prereg_check", "train_reference_arm", "train_registered_arm"]


def prereg_check(prereg_path: PathLike, manifest: PathLike, served_env: PathLike | None = None) -> None:
    """The root of the chain: the prereg matches its lock; the manifest records both files.

    It also builds the design's environment once: a user's factory that cannot be imported, or that
    refuses its params, fails here, and the guards the decision rule reads are checked against the spec
    the environment declares, as are the guards the phase-2 reward penalises (a built-in's were checked
    when the design was read), and the policy loss and advantage estimator phase 2 names are checked
    against phase 2's registries (:mod:`grpo_probe.phase2.pilot_choices`: the prereg package, below
    phase 2 and without torch, cannot see them), so a misspelt name stops the run before the probe. A
    design's split of the state into LeRobot's keys is checked against the entries the environment names.

    A design whose simulator is served (``env: {source: server}``) writes its server's hello to
    ``served_env`` (``prereg/served_env.json``, :mod:`grpo_probe.envs.served_record`): every later job of
    the results folder declares it and refuses a server that says another simulator, naming the field.
    """
    prereg = load_prereg(prereg_path)
    check_built_environment(prereg)  # the same check as `grpo-probe prereg check`
    from grpo_probe.analysis.error_rates.size_check import size_check  # numpy and the rule: this job only

    sizes = size_check(prereg)  # and the same warning: sizes that cannot hold the false-go target
    if sizes is not None and sizes.cannot_hold:
        print(sizes.warning(str(prereg.path)), file=sys.stderr)
    if prereg.phase2 is not None:  # the losses import torch: only a design with a pilot pays for it
        from grpo_probe.phase2.pilot_choices import check_pilot_choices

        check_pilot_choices(prereg)
    extra = None
    outputs = [prereg.path, Path(f"{prereg.path}.lock")]
    if prereg.env.id == SERVED_FACTORY:  # compute.md counts the simulator server's CPU from here
        server = prereg.env.params["server"]
        extra = {"server_cpu": server_reading("environment", server["address"], server["timeout_s"])}
    if served_env is not None:
        _record_served_env(prereg, served_env)
        outputs.append(Path(served_env))
    write_design_manifest(prereg, manifest, "prereg_check", outputs, [], extra)


def _record_served_env(prereg: Prereg, record: PathLike) -> None:
    """The hello this job read from the design's environment server (its spec was built above)."""
    from grpo_probe.envs.served_record import first_hello, write_record

    if prereg.env.id != SERVED_FACTORY:
        raise ValueError(f"{prereg.path}: env is not served (env.source: server), so it has no {record}")
    address = str(prereg.env.params["server"]["address"])
    hello = first_hello(address)
    if hello is None:
        raise RuntimeError(f"{prereg.path}: env.address {address}: no hello was read while building the env")
    write_record(record, address, hello)


def demos(prereg_path: PathLike, upstream: Sequence[PathLike], out: PathLike, manifest: PathLike) -> None:
    """Scripted-expert demonstrations on the registered demo seeds and noise."""
    prereg = load_prereg(prereg_path)
    cameras = _demo_cameras(prereg)
    collected = collect_env_demos(
        prereg.env,
        prereg.training.demo_seeds,
        prereg.training.demo_noise,
        prereg.run_key,
        cameras=cameras,
    )
    collected.save(out)
    frames = f", with {', '.join(c.key for c in cameras)} frames" if cameras else ""
    print(
        f"demos: {len(collected.obs)} (observation, chunk) pairs from {len(prereg.training.demo_seeds)} "
        f"expert episodes{frames}",
        flush=True,
    )
    write_design_manifest(prereg, manifest, "demos", [out], upstream, {"pairs": len(collected.obs)})


def _demo_cameras(prereg: Prereg) -> list[Any]:  # -> list[CameraConfig]
    """The registered cameras some arm reads: the demos record their frames at each replan."""
    names = sorted({c for arm in prereg.arms.values() for k in arm.inputs if (c := camera_of(k))})
    return [prereg.observation.camera(name) for name in names]


def train_registered_arm(prereg: Prereg, arm: str, demos_npz: PathLike, checkpoint: PathLike) -> str:
    """Behaviour-clone ``arm`` of ``prereg`` on the demos with its registered budget; the checkpoint's
    sha256. The training job's step, which the cross-CPU chain (tools/cross_cpu/chain.py) runs too."""
    from grpo_probe.policies.train import train_arm

    env = env_spec(prereg.env)
    return train_arm(
        prereg.arms[arm].head,
        Demos.load(demos_npz, obs_dim=env.obs_dim),
        checkpoint,
        prereg.training.arms.get(arm),
        chunk_shape=(env.chunk_length, env.action_dims),
        where=f"{prereg.path}: training.arms.{arm}",
        inputs=prereg.arms[arm].inputs,
    )


def train_reference_arm(
    prereg_path: PathLike,
    arm: str,
    demos_npz: PathLike,
    upstream: Sequence[PathLike],
    checkpoint: PathLike,
    source: PathLike,
    manifest: PathLike,
) -> None:
    """Behaviour-clone a reference arm on the demos with its registered budget (deterministic)."""
    # Local: torch and the trainer (with the tokenizer) cost about 1 s, which only this job needs.
    import torch

    torch.set_num_threads(1)
    prereg = load_prereg(prereg_path)
    if arm not in prereg.arms:
        raise ValueError(f"{prereg.path}: no arm {arm!r} is registered")
    sha = train_registered_arm(prereg, arm, demos_npz, checkpoint)
    check_pin(prereg, arm, checkpoint, sha)
    atomic_write_json(source, {"arm": arm, "checkpoint": str(checkpoint), "factory": None})
    write_design_manifest(
        prereg, manifest, "train", [checkpoint, source], upstream, {"arm": arm, "checkpoint_sha256": sha}
    )
