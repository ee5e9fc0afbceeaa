"""The reference simulator: a MuJoCo boat-push tabletop stepped in policy action chunks."""

from grpo_probe.sim.env import OBS_DIM, BoatPushEnv, EnvState, run_episode
from grpo_probe.sim.params import ACTION_DIMS, SimParams
from grpo_probe.sim.record import EpisodeRecord

__all__ = ["ACTION_DIMS", "OBS_DIM", "BoatPushEnv", "EnvState", "EpisodeRecord", "SimParams", "run_episode"]
