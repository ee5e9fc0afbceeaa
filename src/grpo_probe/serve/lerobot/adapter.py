"""A loaded LeRobot policy behind the act() contract: each row's chunk from its observation and key alone.

Why each piece:

- **One row at a time**, each under its own ``torch.Generator`` seeded from the row's key
  (:func:`~grpo_probe.serve.lerobot.rows.row_seed`): the same key gives the same bytes in any batch and
  any process, and the draw index gives fresh noise, which is what the probe's oracles check. LeRobot's
  policies draw from torch's global generator unless handed one, so each type's sampler hands its own:
  Diffusion's initial noise *and* the DDPM scheduler's per-step noise (``conditional_sample(...,
  generator=)``), ACT's latent ``z`` drawn from its prior N(0, I) (LeRobot sets ``z = 0`` at inference,
  which makes every draw the same), VQ-BeT's code sampling and any other type's draws under a forked
  global generator seeded from the key.
- **A fresh history per row** (``reset()``, the observation repeated ``n_obs_steps`` times): LeRobot's
  queues would make a row depend on the calls before it.
- **The chunk cut** to the design's registered length, **the sampling steps** from the mode
  (Diffusion's ``num_inference_steps``), and **actions in [-1, 1]** from the environment's bounds.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import torch

from grpo_probe.serve.contract import PolicyCapabilities, PolicyOutput, RowDiagnostics
from grpo_probe.serve.lerobot.rows import (
    ActionBounds,
    CameraMap,
    cut_chunk,
    frame_to_chw,
    row_seed,
    stack_history,
)

__all__ = [
    "ACTSampler",
    "DiffusionSampler",
    "LeRobotAdapter",
    "SeededGlobalSampler",
    "VQBeTSampler",
    "sampler_for",
]

STATE = "observation.state"
KINDS = ("flow_ode",)
"""The probe's sampling kind for a policy that samples with its own sampler from noise seeded per row."""


class Sampler(Protocol):
    """How one LeRobot policy type draws a chunk with every random draw taken from ``generator``; its
    ``declared`` name and sentence go into the server's hello, and decision.md says them of the arm."""

    declared: Mapping[str, str]

    def history(self, config: Any) -> int | None:
        """The observation history's length the type's ``predict_action_chunk`` reads (None: no time
        dimension)."""
        ...

    def chunk(
        self, policy: Any, batch: dict[str, torch.Tensor], generator: torch.Generator, steps: int
    ) -> Any:
        """Normalized actions [1, T, action_dim] for one row's preprocessed ``batch``."""
        ...


class DiffusionSampler:
    """LeRobot's Diffusion Policy: ``[1, n_obs_steps, ...]`` inputs, ``mode.steps`` as
    ``num_inference_steps``, and the row's generator for the initial noise and every DDPM step."""

    declared: ClassVar[Mapping[str, str]] = {
        "name": "DDPM",
        "text": "LeRobot's DDPM sampler: fresh initial noise and a stochastic denoising step at every one "
        "of the mode's steps, each drawn from the draw's key",
    }

    def history(self, config: Any) -> int | None:
        return int(config.n_obs_steps)  # generate_actions reads (B, n_obs_steps) even for one step

    def chunk(
        self, policy: Any, batch: dict[str, torch.Tensor], generator: torch.Generator, steps: int
    ) -> Any:
        policy.reset()
        model = policy.diffusion
        model.num_inference_steps = int(steps)
        with _bound(model, "conditional_sample", generator=generator):
            return policy.predict_action_chunk(batch)


class ACTSampler:
    """LeRobot's ACT: the CVAE's latent ``z`` drawn from its prior N(0, I) with the row's generator
    (where the checkpoint was trained with its VAE; ``use_vae: false`` keeps LeRobot's ``z = 0``)."""

    declared: ClassVar[Mapping[str, str]] = {
        "name": "ACT latent",
        "text": "ACT's CVAE latent z drawn once per chunk from its prior N(0, I) with the draw's key (z = 0, "
        "so no spread, for a checkpoint trained without its VAE)",
    }

    def history(self, config: Any) -> int | None:
        return None

    def chunk(
        self, policy: Any, batch: dict[str, torch.Tensor], generator: torch.Generator, steps: int
    ) -> Any:
        config = policy.config
        projection = policy.model.encoder_latent_input_proj
        if not getattr(config, "use_vae", True):
            return policy.predict_action_chunk(batch)
        weight = projection.weight
        z = torch.randn((1, int(config.latent_dim)), generator=generator, device=generator.device)
        z = z.to(device=weight.device, dtype=weight.dtype)
        handle = projection.register_forward_pre_hook(lambda module, args: (z.expand_as(args[0]),))
        try:
            return policy.predict_action_chunk(batch)
        finally:
            handle.remove()


class SeededGlobalSampler:
    """Any other type whose ``predict_action_chunk`` reads the batch it is given: its draws from torch's
    global generator, forked and seeded from the row's key for the call, so the process's own stream is
    left as it was; ``mode.steps`` as the config's ``num_inference_steps`` where it has one."""

    declared: ClassVar[Mapping[str, str]] = {
        "name": "the policy's own sampling",
        "text": "the policy's own predict_action_chunk, its random draws from torch's generator seeded from "
        "the draw's key",
    }

    def history(self, config: Any) -> int | None:
        n = int(getattr(config, "n_obs_steps", 1) or 1)
        return n if n > 1 else None

    def chunk(
        self, policy: Any, batch: dict[str, torch.Tensor], generator: torch.Generator, steps: int
    ) -> Any:
        policy.reset()
        if hasattr(policy.config, "num_inference_steps"):
            policy.config.num_inference_steps = int(steps)
        return self._seeded(policy, batch, generator)

    @staticmethod
    def _seeded(policy: Any, batch: dict[str, torch.Tensor], generator: torch.Generator) -> Any:
        devices = [generator.device.index or 0] if generator.device.type != "cpu" else []
        seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())
        with torch.random.fork_rng(devices=devices, device_type=generator.device.type):
            torch.manual_seed(seed)
            return policy.predict_action_chunk(batch)


class VQBeTSampler(SeededGlobalSampler):
    """LeRobot's VQ-BeT: its ``predict_action_chunk`` reads only the queues ``select_action`` fills, so
    the row's observation fills them (``n_obs_steps`` copies, its cameras stacked under
    ``observation.images``, as ``select_action`` does); its code sampling (``torch.multinomial``) draws
    from the forked global generator seeded from the row's key."""

    declared: ClassVar[Mapping[str, str]] = {
        "name": "VQ-BeT code sampling",
        "text": "VQ-BeT's code sampling (torch.multinomial over its codebook), seeded from the draw's key",
    }

    def history(self, config: Any) -> int | None:
        return None  # the queues hold the history

    def chunk(
        self, policy: Any, batch: dict[str, torch.Tensor], generator: torch.Generator, steps: int
    ) -> Any:
        policy.reset()
        batch = dict(batch)
        cameras = list(policy.config.image_features)
        if cameras:
            batch["observation.images"] = torch.stack([batch[k] for k in cameras], dim=-4)
        batch = {k: v for k, v in batch.items() if k.startswith("observation.") and v is not None}
        for key, queue in policy._queues.items():
            if key in batch:
                queue.extend([batch[key]] * queue.maxlen)
        return self._seeded(policy, batch, generator)


_SAMPLERS: Mapping[str, Callable[[], Sampler]] = {
    "diffusion": DiffusionSampler,
    "act": ACTSampler,
    "vqbet": VQBeTSampler,
}


def sampler_for(policy_type: str) -> Sampler:
    """The sampler for a checkpoint's config ``type``: its own for Diffusion, ACT and VQ-BeT, the seeded
    global generator for any other."""
    return _SAMPLERS.get(policy_type, SeededGlobalSampler)()


@contextlib.contextmanager
def _bound(obj: Any, method: str, **kwargs: Any) -> Iterator[None]:
    """``obj.method`` called with ``kwargs`` added, for the block (an instance attribute over the class's
    method, deleted after, so the object is as it was)."""
    setattr(obj, method, functools.partial(getattr(obj, method), **kwargs))
    try:
        yield
    finally:
        delattr(obj, method)


def _feature_type(feature: Any) -> str:
    kind = getattr(feature, "type", None)
    return str(getattr(kind, "value", kind))


def _feature_shape(feature: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in feature.shape)


class LeRobotAdapter:
    """The act() contract around a LeRobot policy (``config``, ``reset()``, ``predict_action_chunk``)
    and its pre- and post-processors (normalization; identity where the checkpoint has none).

    ``chunk_length`` is the chunk the design registers (its ``chunk_length``), at most what the policy
    returns from the current observation; ``source`` names the checkpoint in errors.
    """

    head = "flow"

    def __init__(
        self,
        policy: Any,
        sampler: Sampler,
        *,
        preprocess: Callable[[dict[str, Any]], dict[str, Any]],
        postprocess: Callable[[Any], Any],
        cameras: CameraMap,
        bounds: ActionBounds,
        chunk_length: int,
        device: str = "cpu",
        source: str = "the LeRobot policy",
    ) -> None:
        config = policy.config
        features = dict(config.input_features)
        self.policy, self.sampler = policy, sampler
        self.preprocess, self.postprocess = preprocess, postprocess
        self.cameras, self.bounds, self.device, self.source = cameras, bounds, device, source
        if chunk_length < 1:
            raise ValueError(f"{source}: --chunk-length must be >= 1, got {chunk_length}")
        self.chunk_length = int(chunk_length)
        self._history = sampler.history(config)
        self._vectors = {
            k: _feature_shape(f) for k, f in features.items() if _feature_type(f) in ("STATE", "ENV")
        }
        self._images = {k: _feature_shape(f) for k, f in features.items() if _feature_type(f) == "VISUAL"}
        unread = sorted(set(features) - set(self._vectors) - set(self._images))
        if unread:
            raise ValueError(
                f"{source}: input features {unread} are not state, environment state or images, which is "
                "what the probe hands a policy"
            )
        self.input_keys = (*self._vectors, *cameras.probe_to_checkpoint)
        self.obs_dim = self._vectors[STATE][0] if STATE in self._vectors else 0
        self.capabilities = PolicyCapabilities(kinds=KINDS)

    def act(self, obs: Mapping[str, np.ndarray], keys: Sequence[Any], mode: Any) -> PolicyOutput:
        """One chunk per row, float32 [B, chunk_length, action_dim] in [-1, 1]."""
        if mode.kind not in KINDS:
            raise ValueError(
                f"{self.source} samples with its own sampler from the row's key only ({', '.join(KINDS)}), "
                f"got mode kind {mode.kind!r}"
            )
        missing = [k for k in self.input_keys if k not in obs]
        if missing:
            raise ValueError(f"{self.source} reads {missing}, not in the request (it has {sorted(obs)})")
        chunks = [self._row(obs, row, key, int(mode.steps)) for row, key in enumerate(keys)]
        actions = np.concatenate(chunks) if chunks else np.zeros((0, self.chunk_length, self.bounds.low.size))
        return PolicyOutput(
            actions=actions.astype(np.float32), diagnostics=[RowDiagnostics(None) for _ in keys]
        )

    def _row(self, obs: Mapping[str, np.ndarray], row: int, key: Any, steps: int) -> np.ndarray:
        batch: dict[str, Any] = {}
        for name, shape in self._vectors.items():
            value = np.array(obs[name][row : row + 1], dtype=np.float32)  # a copy: any strides in
            if value.shape[1:] != shape:
                raise ValueError(
                    f"{name}: width {list(value.shape[1:])}, the checkpoint expects {list(shape)}"
                )
            batch[name] = value
        for probe, name in self.cameras.probe_to_checkpoint.items():
            batch[name] = frame_to_chw(obs[probe][row : row + 1], probe, self._images[name])
        if self._history is not None:
            batch = {name: stack_history(value, self._history) for name, value in batch.items()}
        generator = torch.Generator(device=self.device).manual_seed(
            row_seed(key.run_key, key.seed, key.replan, key.draw)
        )
        with torch.inference_mode():
            tensors = {name: torch.from_numpy(value).to(self.device) for name, value in batch.items()}
            actions = self.sampler.chunk(self.policy, self.preprocess(tensors), generator, steps)
            actions = self.postprocess(actions)
        actions = np.asarray(actions.detach().to("cpu", torch.float64).numpy())
        return self.bounds.to_unit(cut_chunk(actions, self.chunk_length, self.source))
