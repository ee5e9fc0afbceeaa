"""Pre-registration: the registered design, its schema, its lock, and the run settings beside it."""

from grpo_probe.prereg.design import (
    Amendment,
    Arm,
    Cell,
    ComputeGate,
    LockOutcome,
    Oracles,
    ParallelOracle,
    Prereg,
    PreregError,
    Training,
    environment_problems,
    expand_seeds,
    load_prereg,
    lock_prereg,
    prereg_from_mapping,
    split_seeds,
)
from grpo_probe.prereg.lock import LockError, lock_path
from grpo_probe.prereg.replay import Perturbation, ReplaySection
from grpo_probe.prereg.rule import AnalysisNumbers, BootstrapSpec, DecisionRule
from grpo_probe.prereg.run_config import ArmBinding, RunConfig, arm_bindings, load_config
from grpo_probe.prereg.schema import SchemaError

__all__ = [
    "Amendment",
    "AnalysisNumbers",
    "Arm",
    "ArmBinding",
    "BootstrapSpec",
    "Cell",
    "ComputeGate",
    "DecisionRule",
    "LockError",
    "LockOutcome",
    "Oracles",
    "ParallelOracle",
    "Perturbation",
    "Prereg",
    "PreregError",
    "ReplaySection",
    "RunConfig",
    "SchemaError",
    "Training",
    "arm_bindings",
    "environment_problems",
    "expand_seeds",
    "load_config",
    "load_prereg",
    "lock_path",
    "lock_prereg",
    "prereg_from_mapping",
    "split_seeds",
]
