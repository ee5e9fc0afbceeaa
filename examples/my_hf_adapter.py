"""A checkpoint folder as an arm: a tiny ``transformers`` model saved with ``save_pretrained``.

A ``save_pretrained`` checkpoint is a folder (``config.json`` beside ``model.safetensors``). Bind the
folder itself, not the safetensors file, so every file the loader reads is declared and hashed:

    arms:
      flow_teacher:
        source: checkpoint
        path: checkpoints/tiny_flow          # the folder
        adapter: "examples.my_hf_adapter:load_tiny_flow"

The workflow then lists each file of the folder as an input of the jobs that run the arm (an edit to
``config.json`` plans them again) and records its sha256 in their manifests (``grpo-probe verify`` names
an edited one). ``TinyChunkModel`` stands in for a lab's model: an MLP from (observation, noise) to a chunk,
sampled as ``flow_ode`` with noise drawn from each row's key, one row at a time.
"""

import numpy as np
import torch
from transformers import PretrainedConfig, PreTrainedModel

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies import PolicyCapabilities, PolicyOutput, RowDiagnostics


class TinyChunkConfig(PretrainedConfig):
    model_type = "tiny_chunk"

    def __init__(self, obs_dim=17, chunk_length=50, action_dims=6, hidden=32, **kwargs):
        super().__init__(**kwargs)
        self.obs_dim = obs_dim
        self.chunk_length = chunk_length
        self.action_dims = action_dims
        self.hidden = hidden


class TinyChunkModel(PreTrainedModel):
    config_class = TinyChunkConfig

    def __init__(self, config):
        super().__init__(config)
        size = config.chunk_length * config.action_dims
        self.net = torch.nn.Sequential(
            torch.nn.Linear(config.obs_dim + size, config.hidden),
            torch.nn.Tanh(),
            torch.nn.Linear(config.hidden, size),
        )
        self.post_init()

    def forward(self, obs, noise):
        chunk = self.net(torch.cat([obs, noise.flatten(1)], dim=1))
        return torch.tanh(chunk).view(-1, self.config.chunk_length, self.config.action_dims)


class TinyFlowAdapter:
    head = "flow"
    # The ODE only. The model has weights, but phase 2's trainer cannot reach them through this adapter.
    capabilities = PolicyCapabilities(kinds=("flow_ode",))

    def __init__(self, model):
        self.model = model.eval()
        self.obs_dim = model.config.obs_dim
        self.chunk = (model.config.chunk_length, model.config.action_dims)

    @torch.no_grad()
    def act(self, obs, keys, mode):
        if mode.kind != "flow_ode":
            raise ValueError(f"TinyFlowAdapter samples only 'flow_ode', got {mode.kind!r}")
        streams = [numpy_generator(k.run_key, tag("flow_noise"), k.seed, k.replan, k.draw) for k in keys]
        noise = np.stack([g.standard_normal(self.chunk) for g in streams]).astype(np.float32)
        device = self.model.device
        rows = [
            self.model(torch.from_numpy(o[None]).to(device), torch.from_numpy(n[None]).to(device))[0]
            .cpu()
            .numpy()
            for o, n in zip(np.asarray(obs, dtype=np.float32), noise, strict=True)
        ]
        return PolicyOutput(
            actions=np.stack(rows).astype(np.float32),
            diagnostics=[RowDiagnostics(logprob=None) for _ in keys],
        )


def save_tiny_flow(folder, obs_dim, chunk_length=50, action_dims=6, seed=0):
    """Write a freshly initialised model as a ``save_pretrained`` folder (what a lab's training saves)."""
    torch.manual_seed(seed)
    config = TinyChunkConfig(obs_dim=obs_dim, chunk_length=chunk_length, action_dims=action_dims)
    TinyChunkModel(config).save_pretrained(folder)


def load_tiny_flow(checkpoint, device="cpu"):
    """The adapter factory the workflow calls in every rollout process: the folder in, a policy out."""
    return TinyFlowAdapter(TinyChunkModel.from_pretrained(checkpoint).to(device))
