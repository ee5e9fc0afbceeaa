"""The ``ddim`` sampling kind of the flow head, as a lab declares it: what it samples, what it takes, and
what its draw 0 must reproduce with the noise off.

Why a module of its own, without torch: a design names this module (``samplers: ["labpolicies.ddim"]``),
and every process that reads the design imports it, Snakemake included, at every start. The math lives in
:mod:`labpolicies.ddim_flow` (``entry_module``), which only a process that samples the kind imports.

The kind takes ``sde_a``, read as DDIM's eta (0 <= eta <= 1; the closed parameter set has no ``eta``, and
``sde_a`` is the flow head's noise scale, which eta is), and ``steps`` on the flow head's uniform grid. A
cell samples it as ``{kind: ddim, sde_a: 0.5, steps: 10}``; the rollout table records eta in its
``sde_a`` column.

Noise-off equivalence: at eta = 0 every DDIM step is the flow head's Euler step, computed by the same
function (:func:`grpo_probe.policies.flow_sde.sde_step` with a = 0), so the draw-0 oracle runs a ``ddim``
cell's draw 0 with eta = 0 and compares it, bit for bit, with the built-in ``flow_euler`` sampler on the
same keyed noise, as it does a ``flow_sde`` cell at a = 0.
"""

from grpo_probe.sampling import Draw0, SamplerKind, SamplingMode, register_sampler

KIND = "ddim"


def noise_off(mode: SamplingMode) -> SamplingMode:
    """The cell's mode with its noise switched off: eta = 0, the same steps (the draw-0 probe)."""
    return SamplingMode(KIND, sde_a=0.0, steps=mode.steps)


def euler_twin(mode: SamplingMode) -> SamplingMode:
    """The deterministic mode the noise-off probe reproduces bit for bit: the Euler sampler."""
    return SamplingMode("flow_euler", steps=mode.steps)


DDIM = register_sampler(
    SamplerKind(
        KIND,
        head="flow",
        takes=("sde_a", "steps"),
        summary="DDIM with eta = `sde_a` on the flow head's grid (eta = 0 is the Euler sampler)",
        entry_module="labpolicies.ddim_flow",
        min_steps=2,  # one step lands on t = 0, where DDIM adds no noise whatever eta is
        at_most={"sde_a": 1.0},  # eta > 1 asks for more noise than the path holds at t'
        draw0=Draw0(
            probe=noise_off,
            twin_of=euler_twin,
            against="run",
            reference_name="euler",
            skip=("mode", "sde_a"),
            compared="every column but the mode labels, and the executed actions, against the Euler sampler",
            check_fields=("actions", "logprob"),
        ),
    )
)
