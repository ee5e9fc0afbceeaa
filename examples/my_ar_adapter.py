"""A worked AR adapter ("The act() contract, in full"): a user's token model behind the policy protocol.

Bind it to an AR arm in config/config.yaml or a --configfile, with this folder's parent on PYTHONPATH:

    arms:
      ar:
        source: checkpoint
        path: /data/ckpt/my_tokens.pt
        adapter: "examples.my_ar_adapter:load_my_ar"

and check it before a rollout runs: ``grpo-probe check-policy --prereg prereg/smoke.yaml --arm ar
--configfile my_ar.yaml``. Each row is decoded on its own, token by token; sampling at temperature T is
Gumbel-max with noise drawn from the row's key, and with ``mode.noise`` off the same code takes the argmax
of logits / T, which is greedy's choice. Every row records its token ids, their log-probs and each step's
entropy under the distribution it sampled from, which the analysis and the oracles read. The stand-in
"model" below is a fixed random linear map from the observation, the position and the previous token to
logits over a small codebook; replace ``load_my_ar`` with the loading of yours.
"""

import numpy as np

from grpo_probe.keyed_rng import numpy_generator, tag
from grpo_probe.policies import PolicyCapabilities, PolicyOutput, RowDiagnostics


class MyTokenAdapter:
    head = "ar"
    # Both AR kinds, with per-token log-probs; fixed weights, so nothing for phase 2 to train.
    capabilities = PolicyCapabilities(kinds=("greedy", "temperature"), logprobs="per_token")

    def __init__(self, my_model, obs_dim, n_tokens, codebook, chunk=(50, 6)):
        self.my_model = my_model  # (obs [obs_dim], position, previous id) -> logits [vocab], float64
        self.obs_dim = obs_dim
        self.n_tokens = n_tokens  # tokens per chunk: one value per (knot, action dim)
        self.codebook = codebook  # token id -> value in [-1, 1]
        self.chunk = chunk  # (chunk_length, action_dims) of the environment's spec

    def act(self, obs, keys, mode):
        if mode.kind not in ("greedy", "temperature"):
            raise ValueError(f"MyTokenAdapter samples 'greedy' and 'temperature', got {mode.kind!r}")
        temperature = 1.0 if mode.kind == "greedy" else mode.temperature
        noisy = mode.kind == "temperature" and mode.noise  # noise off: argmax of logits / T, greedy's ids
        actions = np.zeros((len(keys), *self.chunk), dtype=np.float32)
        diagnostics = []
        for row, k in enumerate(keys):  # row by row: a row never sees another
            gumbel = numpy_generator(k.run_key, tag("my_ar_gumbel"), k.seed, k.replan, k.draw)
            ids, logps, entropies, previous = [], [], [], -1  # -1: no token yet
            for position in range(self.n_tokens):
                scaled = self.my_model(obs[row], position, previous) / temperature
                logp = scaled - np.logaddexp.reduce(scaled)  # log softmax(logits / T)
                score = logp + gumbel.gumbel(size=logp.shape) if noisy else logp
                previous = int(np.argmax(score))
                ids.append(previous)
                logps.append(logp[previous])
                entropies.append(-np.sum(np.exp(logp) * logp))
            actions[row] = self.detokenize(np.array(ids))
            logps = np.array(logps, dtype=np.float64)
            diagnostics.append(
                RowDiagnostics(
                    logprob=float(logps.sum()),
                    token_ids=np.array(ids, dtype=np.int32),
                    token_logprobs=logps,
                    entropy=np.array(entropies, dtype=np.float64),
                )
            )
        return PolicyOutput(actions=actions, diagnostics=diagnostics)

    def detokenize(self, ids):
        """Token ids -> one value per (knot, action dim), interpolated linearly over the chunk's steps."""
        length, dims = self.chunk
        knots = self.codebook[ids].reshape(-1, dims)
        t = np.linspace(0.0, 1.0, len(knots))
        steps = np.linspace(0.0, 1.0, length)
        return np.stack([np.interp(steps, t, knots[:, d]) for d in range(dims)], axis=1).clip(-1.0, 1.0)


def load_my_ar(checkpoint=None, device="cpu", obs_dim=17, chunk=(50, 6), knots=4, vocab=32):
    """Load your model from ``checkpoint`` here; this stand-in draws fixed weights from a keyed stream."""
    weights = numpy_generator(tag("my_ar_weights"))
    w_obs = weights.standard_normal((obs_dim, vocab)) * 0.5
    w_position = weights.standard_normal((knots * chunk[1], vocab))
    w_previous = weights.standard_normal((vocab + 1, vocab)) * 0.5

    def my_model(obs, position, previous):
        return obs.astype(np.float64) @ w_obs + w_position[position] + w_previous[previous]

    codebook = np.linspace(-1.0, 1.0, vocab)
    return MyTokenAdapter(my_model, obs_dim, knots * chunk[1], codebook, chunk)
