"""A lab's own package of sampling kinds, registered without editing grpo_probe (docs/extending.md, "A
sampler of your own, without editing the package").

``labpolicies.ddim`` declares the kind ``ddim`` (which head it samples, its parameters, its noise-off
equivalence) and imports no torch; ``labpolicies.ddim_flow`` holds its math, which the flow head imports
the first time it samples the kind. With this folder's parent on ``PYTHONPATH`` (``PYTHONPATH=examples``
from the repository root), a design names the declaration::

    samplers: ["labpolicies.ddim"]
    cells:
      - {id: c5_teacher_ddim, arm: flow_teacher, mode: {kind: ddim, sde_a: 0.5, steps: 10}, ...}
"""
