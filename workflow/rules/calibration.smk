# A registered pilot calibration (config `calibration:`, e.g. prereg/calibrations/pilot_recipe.yaml): each
# candidate design runs as a module of this workflow only as far as its arms' checkpoints (demos, then
# behaviour cloning); then one job per candidate (an arm at a learning rate) trains and scores it, and one
# rule applies the registered selection rule and writes the page.
# `snakemake --cores 2 --config calibration=prereg/calibrations/pilot_recipe.yaml` builds the page.
from grpo_probe.study.calibration import load_calibration

CALIBRATION = load_calibration(config["calibration"])
CALIBRATION_RESULTS = config.get("results", "results")
C = str(CALIBRATION.folder(CALIBRATION_RESULTS))
CALIBRATION_CONFIG = {k: v for k, v in config.items() if k != "calibration"}
CALIBRATION_DESIGNS = {str(c.member): c.design.name for c in CALIBRATION.candidates}


for design_path, design_name in CALIBRATION_DESIGNS.items():

    module:
        name: design_name
        snakefile:
            "../Snakefile"
        config:
            {**CALIBRATION_CONFIG, "prereg": design_path}

    design_prefix = f"{design_name}_"

    use rule * from design_name exclude all, root_decision, phase2_root as design_prefix*


def calibration_arm(name):
    """The candidate's arm file ``name`` (policy.pt, source.json) in its design's results folder."""

    def files(wildcards):
        c = CALIBRATION.candidate(wildcards.candidate)
        return f"{CALIBRATION_RESULTS}/{c.design.name}/arms/{c.arm}/{name}"

    return files


rule calibration_candidate:
    input:
        calibration=config["calibration"],
        lock=f"{config['calibration']}.lock",
        checkpoint=calibration_arm("policy.pt"),
        source=calibration_arm("source.json"),
    output:
        record=f"{C}/candidates/{{candidate}}.json",
    log:
        f"{C}/logs/{{candidate}}.log",
    benchmark:
        f"{C}/benchmarks/{{candidate}}.tsv"
    wildcard_constraints:
        candidate="|".join(CALIBRATION.ids),
    conda:
        "../envs/grpo-probe.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=60,
    params:
        work=lambda wildcards: f"{C}/work/{wildcards.candidate}",
    script:
        "../scripts/calibration_candidate.py"


rule calibration_report:
    input:
        calibration=config["calibration"],
        lock=f"{config['calibration']}.lock",
        records=[f"{C}/candidates/{c}.json" for c in CALIBRATION.ids],
    output:
        md=f"{C}/calibration.md",
        json=f"{C}/calibration.json",
        iterations=f"{C}/calibration_iterations.parquet",
        candidates=f"{C}/calibration_candidates.parquet",
        figure=f"{C}/learning_curves.png",
    log:
        f"{C}/logs/calibration_report.log",
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/calibration_report.py"
