"""The README's VLA-shaped adapter ("Camera-fed policies"): a policy that acts from frames, state and a task.

A vision-language-action model reads a mapping in LeRobot's keys and returns an action chunk. This one
declares the three inputs it reads; the rollout engine renders the overhead camera at the size the
design registers (``observation.cameras``) and passes the registered task string. Bind it to an arm in
config, with this folder's parent on PYTHONPATH:

    arms:
      flow_vision:
        source: checkpoint
        path: /data/ckpt/my_vla.pt
        adapter: "examples.my_vla_adapter:load_my_vla"

Noise comes from the row's key and each row is computed on its own, so the adapter passes the parallel
and draw-0 oracles with frames compared (tests/e2e/test_vision_workflow.py). The stand-in "model" below
pools the frame to a 4 x 4 colour grid and hashes the task's words; replace ``MyVLA.forward`` with yours.
"""

import hashlib

import numpy as np

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies import PolicyCapabilities, PolicyOutput, RowDiagnostics


class MyVLA:
    head = "flow"
    # Every flow kind, but no per-step log-probs (its SDE adds noise once, at the end) and nothing to train.
    capabilities = PolicyCapabilities(kinds=("flow_ode", "flow_euler", "flow_sde"))
    input_keys = ("observation.images.overhead", "observation.state", "task")

    def __init__(self, weights, obs_dim, chunk=(50, 6)):
        self.weights = weights  # [features, 50 * 6]
        self.obs_dim = obs_dim
        self.chunk = chunk

    def forward(self, image, state, task, noise):
        """One row: uint8 [H, W, 3] frame, float32 [S] state, task text, keyed noise -> chunk in [-1, 1]."""
        h, w, _ = image.shape
        grid = image[: h - h % 4, : w - w % 4].reshape(4, h // 4, 4, w // 4, 3).mean(axis=(1, 3)) / 255.0
        words = np.zeros(8)
        for word in task.split():
            words[int.from_bytes(hashlib.sha256(word.encode()).digest()[:2], "little") % 8] += 1.0
        features = np.concatenate([grid.ravel(), state.astype(np.float64), words])
        return np.tanh(features @ self.weights + 0.3 * noise.ravel()).reshape(self.chunk)

    def act(self, obs, keys, mode):
        if mode.kind not in ("flow_ode", "flow_euler", "flow_sde"):
            raise ValueError(f"MyVLA samples flow_ode, flow_euler and flow_sde, got {mode.kind!r}")
        a = float(mode.sde_a or 0.0)  # flow_sde's noise scale; a = 0 is the deterministic sampler
        images, states = obs["observation.images.overhead"], obs["observation.state"]
        actions = np.zeros((len(keys), *self.chunk), dtype=np.float32)
        diagnostics = []
        for row, k in enumerate(keys):
            noise = numpy_generator(k.run_key, tag("flow_noise"), k.seed, k.replan, k.draw)
            step = numpy_generator(k.run_key, tag("flow_sde_noise"), k.seed, k.replan, k.draw)
            eps = step.standard_normal(self.chunk) if a > 0 else np.zeros(self.chunk)
            chunk = self.forward(
                images[row], states[row], obs["task"][row], noise.standard_normal(self.chunk)
            )
            actions[row] = np.clip(chunk + a * eps, -1.0, 1.0).astype(np.float32)
            logprob = float(np.sum(-0.5 * eps**2 - 0.5 * np.log(2 * np.pi) - np.log(a))) if a > 0 else None
            diagnostics.append(RowDiagnostics(logprob=logprob))
        return PolicyOutput(actions=actions, diagnostics=diagnostics)


def load_my_vla(checkpoint=None, device="cpu", obs_dim=17):
    """Load your model from ``checkpoint`` here; this stand-in draws fixed weights from a keyed stream."""
    features = 4 * 4 * 3 + obs_dim + 8
    weights = numpy_generator(tag("my_vla_weights")).standard_normal((features, 50 * 6)) * 0.2
    return MyVLA(weights, obs_dim)
