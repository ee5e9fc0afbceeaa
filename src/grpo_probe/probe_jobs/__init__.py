"""The work behind each workflow rule, one function per rule.

Why here and not in the Snakemake scripts: a rule's script only reads ``snakemake.*`` and calls one of
these, so every step can be imported, tested and rerun by an auditor without Snakemake. Each step
(1) loads the prereg, which refuses a design that does not match its lock before any work is done,
(2) does its work through the package, writing every artifact atomically, and (3) writes a manifest
beside its outputs that lists the sha256 of each output and the manifests of its inputs, so the chain
from decision.md back to the prereg can be verified (``grpo-probe verify``).

Modules, one per stage of the workflow: :mod:`~grpo_probe.probe_jobs.prepare` (the prereg check, demos,
training a reference arm), :mod:`~grpo_probe.probe_jobs.binding` (binding a user's checkpoint or a policy
server to an arm), :mod:`~grpo_probe.probe_jobs.rollouts` (the oracles, anchors, probe shards, replays and
gradients) and :mod:`~grpo_probe.probe_jobs.decision` (the join, decision.md, compute.md and the root
copy); :mod:`~grpo_probe.probe_jobs.sources` builds the rollout jobs and policy sources they share. Each
script under workflow/scripts imports its function from its module; nothing is imported here.
"""
