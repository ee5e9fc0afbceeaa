# The GRPO signal probe, end to end: prereg check -> demos -> train -> parallel oracle -> anchors
# -> probe shards -> draw-0 oracle -> join -> decision.md, then its copy at the repository root.
# Registered numbers live in the prereg (config `prereg:`), run settings in config/config.yaml, machine
# sizing in profiles/. `snakemake --cores 8 decision.md` builds the configured design's decision.
from snakemake.utils import min_version

from grpo_probe.prereg import load_config

min_version("9.0")
# Snakemake's own YAML and schema errors name neither the file nor the field; this check names both.
load_config("config/config.yaml")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


# A registered validation study (`--config study=FILE`) runs its member designs as modules of this
# workflow and compares them; otherwise the configured design runs.
if "study" in config:

    include: "rules/study.smk"

    # The study's page is the default target; defined here, not in the included file, because Snakemake
    # keeps the default target of the main Snakefile only.
    rule study:
        default_target: True
        input:
            f"{S}/validation.md",
        localrule: True

else:

    include: "rules/common.smk"
    include: "rules/prereg.smk"
    include: "rules/train.smk"
    include: "rules/oracles.smk"
    include: "rules/rollouts.smk"
    include: "rules/decision.smk"
    include: "rules/phase2.smk"
    include: "rules/root.smk"

    rule all:
        default_target: True
        input:
            decision_outputs(),
        localrule: True
