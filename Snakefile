# The GRPO signal probe, end to end: prereg check -> demos -> train -> parallel oracle -> anchors
# -> probe shards -> draw-0 oracle -> join -> decision.md. Registered numbers live in the prereg
# (config `prereg:`), run settings in config/config.yaml, machine sizing in profiles/.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/prereg.smk"
include: "rules/train.smk"
include: "rules/oracles.smk"
include: "rules/rollouts.smk"
include: "rules/decision.smk"


rule all:
    default_target: True
    input:
        decision_outputs(),
