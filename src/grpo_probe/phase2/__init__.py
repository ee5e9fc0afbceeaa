"""Phase 2: the GRPO pilot the probe's decision names, run as a gated stage of the workflow.

Modules, in the order a stage runs: ``gate`` (the plan read from decision.json), ``guard_variance``
(whether each penalised guard varies within the probe's groups, or the arm is refused), ``recording`` and
``rollouts`` (keyed group rollouts recorded with what an update needs), ``reward`` (the reward from the
environment's guard declarations, group advantage, dynamic sampling), ``recompute`` (the recorded
log-probs recomputed under the current weights) and ``recompute_oracle`` (their check against the
record, written as the replay oracle), ``losses`` (the clipped surrogate and the KL terms),
``pilot_choices`` (the loss and estimator a design names, checked against the registries of ``losses``
and ``reward``), ``trainer`` (the iteration loop), ``evaluate`` (held-out paired evaluation and what its
seeds can detect), ``movement`` (how far training moved the policy), ``report`` (phase2.json and its
figures), ``page`` (phase2.md from phase2.json), ``stage_inputs`` (what every job of a stage checks
before it runs), ``stage`` (the one function a stage trains by: the pilot, its replicates, the calibration's
candidates), ``pilot_jobs`` and ``replicate_jobs`` (one function per rule) and ``paths`` (where each
artifact lives).

Nothing is imported here: Snakemake reads ``paths`` while parsing the rules, and that must not load torch.
"""
