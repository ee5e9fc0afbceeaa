# Config and prereg loading, validation, and the named helpers every rule uses.
import sys

from grpo_probe.analysis.page.figure_names import figure_files
from grpo_probe.envs.served import SERVED_FACTORY
from grpo_probe.envs.served_record import RECORD_NAME
from grpo_probe.prereg import arm_bindings, split_seeds
from grpo_probe.prereg.run_config import config_sources, load_config
from grpo_probe.prereg.run_design import load_run_design
from grpo_probe.user_code import env_code_files, module_files, policy_files

# The merged config, checked against the package's config.schema.yaml: an error names the field and the
# place that set it (config/config.yaml, a --configfile or --config), which Snakemake's validate() cannot.
# Then the design, with every problem it has listed at once (its results folder shared with another
# design, its schema and cross-field rules, its lock) before any job is scheduled. A problem is the
# reader's input, not this file's: it is printed as it is, without Snakemake's file-and-line heading.
try:
    RUN = load_config(
        config,
        sources=config_sources(
            workflow.configfiles,
            workflow.overwrite_configfiles,
            workflow.config_settings.config,
        ),
    )
    PREREG = load_run_design(RUN.prereg, RUN.results)
except (ValueError, FileNotFoundError) as exc:
    sys.exit(str(exc))
R = f"{RUN.results}/{PREREG.name}"
CELLS = [cell.id for cell in PREREG.enabled_cells]
BINDINGS = arm_bindings(RUN, PREREG)
ARMS = sorted(set(PREREG.arms_in_use()) | set(PREREG.oracles.parallel.arms))
REFERENCE_ARMS = [a for a in ARMS if BINDINGS[a].source == "reference"]
CHECKPOINT_ARMS = [a for a in ARMS if BINDINGS[a].source == "checkpoint"]
# Arms served by a policy server (docs/serving.md): no checkpoint file, no adapter code to hash.
SERVED_ARMS = [a for a in ARMS if BINDINGS[a].source == "server"]
# Shards by index over the registered seed order: shard-{i} holds the i-th run of seeds_per_shard seeds.
SHARD_SEEDS = split_seeds(PREREG.seeds, RUN.seeds_per_shard)
SHARDS = [f"shard-{i}" for i in range(len(SHARD_SEEDS))]
# Replays (the design's replay: section) run per probe shard that holds a replayed seed.
REPLAY = PREREG.replay
REPLAY_SHARDS = (
    [s for s, seeds in zip(SHARDS, SHARD_SEEDS) if set(seeds) & set(REPLAY.seeds)]
    if REPLAY
    else []
)
# Each replayed shard's replayed seeds, in registered order (a cell's replay job replays them).
REPLAY_SHARD_SEEDS = [
    [s for s in seeds if s in REPLAY.seeds]
    for shard, seeds in zip(SHARDS, SHARD_SEEDS)
    if shard in REPLAY_SHARDS
]


def _alternatives(names):
    return "|".join(names) if names else "(?!x)x"


wildcard_constraints:
    arm=_alternatives(ARMS),
    cell=_alternatives(CELLS),
    shard=r"shard-\d+",


# A user's environment code (env.id "package.module:factory", and wrappers or an expert its params
# name): every step loads the design, which names it, and records its files' sha256, so an edit to it
# plans every step again.
ENV_CODE = [str(p) for p in env_code_files(PREREG.env.id, PREREG.env.params)]
# The design's own sampling kinds (samplers: ["labpolicies.ddim"]): every step imports their modules
# when it loads the design, so an edit to the lab's sampler plans every step again, as for its scene.
SAMPLER_CODE = [str(p) for p in module_files(PREREG.sampler_modules)]
# A simulator served from its own environment (env: {source: server}): the prereg check records the
# server's hello here, and every later step declares it and refuses a server that says another simulator.
SERVED_ENV_RECORD = (
    [f"{R}/prereg/{RECORD_NAME}"] if PREREG.env.id == SERVED_FACTORY else []
)


def prereg_files(record=True):
    """The prereg, its lock, the shared rule files it extends, a user environment's code and the design's
    own samplers: every step loads the design through them. ``record``: with the served simulator's
    record (every step but the prereg check, which writes it)."""
    return {
        "prereg": str(RUN.prereg),
        "lock": f"{RUN.prereg}.lock",
        "extends": [str(shared.path) for shared in PREREG.extends],
        "env_code": ENV_CODE,
        "sampler_code": SAMPLER_CODE,
        "served_env": SERVED_ENV_RECORD if record else [],
    }


def policy_code(arm):
    """What an arm's policy reads beyond this package: its adapter's package and a checkpoint folder's
    files (a single checkpoint file is the rule's `checkpoint` input)."""
    binding = BINDINGS[arm]
    if binding.source in ("reference", "server"):
        return []
    return [str(p) for p in policy_files(binding.adapter, binding.path)]


def arm_code(wildcards):
    return policy_code(wildcards.arm)


def cell_code(wildcards):
    return policy_code(PREREG.cell(wildcards.cell).arm)


def oracle_code():
    return sorted({f for arm in PREREG.oracles.parallel.arms for f in policy_code(arm)})


def prereg_manifest():
    return f"{R}/prereg/check.manifest.json"


def checkpoint_of(arm):
    """The checkpoint file an arm's policy is loaded from: the one training writes, or the bound file.

    Declared as an input of every rule that runs the arm (not only reached through source.json), so
    Snakemake knows what the job reads and an executor that stages inputs stages it. A served arm has
    none (an empty input): the server holds its checkpoint.
    """
    if BINDINGS[arm].source == "reference":
        return f"{R}/arms/{arm}/policy.pt"
    if BINDINGS[arm].source == "server":
        return []
    return BINDINGS[arm].path


def arm_source(wildcards):
    return f"{R}/arms/{wildcards.arm}/source.json"


def arm_checkpoint(wildcards):
    return checkpoint_of(wildcards.arm)


def arm_manifest(wildcards):
    return f"{R}/arms/{wildcards.arm}/arm.manifest.json"


def anchor_upstream(wildcards):
    """The arm, and the parallel oracle: no result is taken from the parallel path before it is proven."""
    return [arm_manifest(wildcards), f"{R}/oracles/parallel.manifest.json"]


def bound_checkpoint(wildcards):
    return BINDINGS[wildcards.arm].path


def bound_adapter(wildcards):
    return BINDINGS[wildcards.arm].adapter


def served_address(wildcards):
    return BINDINGS[wildcards.arm].address


def served_timeout(wildcards):
    return BINDINGS[wildcards.arm].timeout_s


def oracle_sources():
    return {arm: f"{R}/arms/{arm}/source.json" for arm in PREREG.oracles.parallel.arms}


def oracle_checkpoints():
    """The checkpoint file of each arm the parallel oracle runs (served arms have none)."""
    return {
        arm: checkpoint_of(arm)
        for arm in PREREG.oracles.parallel.arms
        if BINDINGS[arm].source != "server"
    }


def oracle_arm_manifests():
    return [f"{R}/arms/{arm}/arm.manifest.json" for arm in PREREG.oracles.parallel.arms]


def cell_arm(wildcards):
    return PREREG.cell(wildcards.cell).arm


def cell_source(wildcards):
    return f"{R}/arms/{cell_arm(wildcards)}/source.json"


def cell_checkpoint(wildcards):
    return checkpoint_of(cell_arm(wildcards))


def cell_anchor_table(wildcards):
    return f"{R}/anchors/{cell_arm(wildcards)}.parquet"


def cell_upstream(wildcards):
    """The arm and its anchors: a probe shard runs only after the anchors it is joined against."""
    arm = cell_arm(wildcards)
    return [f"{R}/arms/{arm}/arm.manifest.json", f"{R}/anchors/{arm}.manifest.json"]


def shard_seeds(wildcards):
    return list(SHARD_SEEDS[int(wildcards.shard.removeprefix("shard-"))])


def cell_shard_tables(wildcards):
    return [f"{R}/probe/{wildcards.cell}/{shard}.parquet" for shard in SHARDS]


def cell_join_upstream(wildcards):
    shards = [f"{R}/probe/{wildcards.cell}/{shard}.manifest.json" for shard in SHARDS]
    return [*shards, *cell_upstream(wildcards)[1:]]


def replay_probe_tables(wildcards):
    """The probe table of each shard holding a replayed seed: the draws its replays rerun."""
    return [f"{R}/probe/{wildcards.cell}/{shard}.parquet" for shard in REPLAY_SHARDS]


def replay_upstream(wildcards):
    """The cell's join (its probe table is the replay oracle's reference, and it lists every probe shard
    and the anchors) and its arm."""
    return [f"{R}/join/{wildcards.cell}.manifest.json", *cell_upstream(wildcards)[:1]]


def cell_replay_tables(cell):
    """The cell's replay tables, one per shard holding a replayed seed (none without a replay section);
    with cell "{cell}", the replay rule's output pattern."""
    return [f"{R}/replay/{cell}/{shard}.parquet" for shard in REPLAY_SHARDS]


def decision_replay_tables():
    return {cell: cell_replay_tables(cell) for cell in CELLS} if REPLAY else {}


def decision_cell_tables():
    return {cell: f"{R}/cells/{cell}.parquet" for cell in CELLS}


def decision_anchor_tables():
    arms = sorted({PREREG.cell(cell).arm for cell in CELLS})
    return {arm: f"{R}/anchors/{arm}.parquet" for arm in arms}


def decision_upstream():
    """Every cell's join and, with a replay section, its replays (whose oracle must pass first)."""
    joins = [f"{R}/join/{cell}.manifest.json" for cell in CELLS]
    replays = [f"{R}/replay/{cell}.manifest.json" for cell in CELLS] if REPLAY else []
    return joins + replays


def design_page(name):
    """A page of the configured design and its record: results/<design>/<name>.md and .json."""
    return {"md": f"{R}/{name}.md", "json": f"{R}/{name}.json"}


def root_page(name):
    """The same page at the repository root, rendered for that folder (decision.md, later phase2.md).

    The per-design folders stay; the root holds the configured design's page, which names the design
    and its folder and links from the root (see grpo_probe.probe_jobs.decision.root_decision).
    """
    return {"md": f"{name}.md", "json": f"{name}.json"}


def decision_outputs():
    return [
        *design_page("decision").values(),
        f"{R}/compute.md",
        *root_page("decision").values(),
        *every_intermediate(),
    ]


def every_intermediate():
    """Every file a job on the way to decision.md writes, so that the default target asks for each: a
    deleted shard, table, checkpoint or figure is then missing from the DAG's point of view and rebuilt,
    rather than passed over because the pages after it exist (Snakemake only rebuilds a missing file a
    requested target needs)."""
    files = [
        prereg_manifest(),
        f"{R}/oracles/parallel.json",
        f"{R}/oracles/parallel.manifest.json",
    ]
    if REFERENCE_ARMS:
        files += [f"{R}/demos/demos.npz", f"{R}/demos/demos.manifest.json"]
    for arm in ARMS:
        files += [f"{R}/arms/{arm}/source.json", f"{R}/arms/{arm}/arm.manifest.json"]
        if arm in REFERENCE_ARMS:
            files.append(f"{R}/arms/{arm}/policy.pt")
    for arm, table in decision_anchor_tables().items():
        files += [table, f"{R}/anchors/{arm}.manifest.json"]
    for cell in CELLS:
        for shard in SHARDS:
            files += [
                f"{R}/probe/{cell}/{shard}.parquet",
                f"{R}/probe/{cell}/{shard}.manifest.json",
            ]
        files += [
            f"{R}/cells/{cell}.parquet",
            f"{R}/join/{cell}.parquet",
            f"{R}/join/{cell}.manifest.json",
        ]
        if REPLAY:
            files += [*cell_replay_tables(cell), f"{R}/oracles/replay/{cell}.json"]
            files.append(f"{R}/replay/{cell}.manifest.json")
    files += [*decision_gradient_files().values(), *decision_gradient_manifests()]
    files += [f"{R}/figures/{figure.name}" for figure in figure_files(PREREG)]
    files += [f"{R}/decision.manifest.json", f"{R}/reads.tsv", f"{R}/compute.json"]
    return files


# The gradient reads (rules/gradients.smk): only a design with `analysis.gradient_reads: true` has them.
GRADIENT_CELLS = CELLS if PREREG.analysis.gradient_reads else []


def decision_gradient_files():
    return {cell: f"{R}/gradients/{cell}.json" for cell in GRADIENT_CELLS}


def decision_gradient_manifests():
    return [f"{R}/gradients/{cell}.manifest.json" for cell in GRADIENT_CELLS]


def gradient_upstream(wildcards):
    """The cell's join (it lists every probe shard and the anchors) and its arm."""
    return [f"{R}/join/{wildcards.cell}.manifest.json", *cell_upstream(wildcards)[:1]]
