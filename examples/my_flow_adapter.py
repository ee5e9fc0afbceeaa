"""The README's adapter ("Bring your own checkpoint"): a user's flow model behind the policy protocol.

Bind it to an arm in config/config.yaml or a --configfile, with this folder's parent on PYTHONPATH:

    arms:
      flow_teacher:
        source: checkpoint
        path: /data/ckpt/teacher.pt
        adapter: "examples.my_flow_adapter:load_my_flow"

The workflow calls ``load_my_flow(checkpoint=path, device=device)`` in every rollout process. Noise comes
from the row's key (never a global RNG) and each row is computed on its own, so the adapter passes the
parallel and draw-0 oracles (tests/e2e/test_example_adapter.py runs both on the smoke design). It samples
``flow_ode`` only, as the smoke design's flow cell does, and declares just that: bound to an arm of a design
with an SDE cell, which needs ``flow_sde`` too, it is refused before any episode, and phase 2, which needs
trainable parameters and per-step log-probs, refuses to train it.
"""

import numpy as np
import torch

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies import PolicyCapabilities, PolicyOutput, RowDiagnostics


class MyFlowAdapter:
    head = "flow"
    capabilities = PolicyCapabilities(kinds=("flow_ode",))  # no SDE, no log-probs, nothing to train

    def __init__(self, my_model, obs_dim):
        self.my_model = my_model  # (obs [1, obs_dim], noise [1, 50, 6], steps) -> chunk [1, 50, 6] in [-1, 1]
        self.obs_dim = obs_dim

    def act(self, obs, keys, mode):
        if mode.kind != "flow_ode":
            raise ValueError(f"MyFlowAdapter samples only 'flow_ode', got {mode.kind!r}")
        streams = [numpy_generator(k.run_key, tag("flow_noise"), k.seed, k.replan, k.draw) for k in keys]
        noise = np.stack([g.standard_normal((50, 6)) for g in streams]).astype(np.float32)
        actions = np.stack(
            [self.my_model(o[None], n[None], mode.steps)[0] for o, n in zip(obs, noise, strict=True)]
        )
        return PolicyOutput(
            actions=actions.astype(np.float32), diagnostics=[RowDiagnostics(logprob=None) for _ in keys]
        )


def load_my_flow(checkpoint, device="cpu"):
    """Load your model from ``checkpoint`` here. This stand-in reads one of this package's flow checkpoints
    and integrates its velocity field with Euler steps from the given noise (t = 1 noise -> t = 0 action)."""
    from grpo_probe.policies import load_policy

    flow = load_policy(checkpoint, device=device)

    @torch.no_grad()
    def my_model(obs, noise, steps):
        cond = torch.from_numpy(((obs - flow.obs_mean) / flow.obs_std).astype(np.float32)).to(flow.device)
        x = torch.from_numpy(noise).to(flow.device)
        for i in range(steps):
            t = torch.full((1,), 1.0 - i / steps, device=flow.device)
            x = x - flow.model(x, t, cond) / steps
        chunk = (x.cpu().numpy() + 1.0) * 0.5 * (flow.action_high - flow.action_low) + flow.action_low
        return np.clip(chunk, -1.0, 1.0)

    return MyFlowAdapter(my_model, obs_dim=flow.obs_dim)
