"""Gymnasium's MuJoCo Pusher-v5 as a probe environment: its declaration (``spec``), the environment through
the Gymnasium adapter (``environment``) and a scripted expert that reaches, pushes and settles (``expert``).

Nothing is imported here, so reading the design's numbers (:mod:`grpo_probe.envs.pusher.spec`) does not
import Gymnasium or MuJoCo.
"""
