# A registered validation study (config `study:`, e.g. prereg/studies/validation.yaml): every member
# design runs as its own module of this workflow (its rules prefixed with the design's name), each up to
# its phase-2 pilot on every arm; then one rule puts each arm's probe reads beside its held-out gain.
# `snakemake --cores 2 --config study=prereg/studies/validation_smoke.yaml` builds the page.
from grpo_probe.study.design import load_study

STUDY = load_study(config["study"])
STUDY_RESULTS = config.get("results", "results")
S = str(STUDY.folder(STUDY_RESULTS))
MEMBER_CONFIG = {k: v for k, v in config.items() if k != "study"}


for member in STUDY.members:
    member_module = member.design.name

    module:
        name: member_module
        snakefile:
            "../Snakefile"
        config:
            {**MEMBER_CONFIG, "prereg": str(member.design.path)}

    member_prefix = f"{member.design.name}_"

    use rule * from member_module exclude all, root_decision, phase2_root as member_prefix*


def member_files(name):
    """Each member's pages (decision.json, phase2.json) or their manifests, in the registered order."""
    return [f"{STUDY_RESULTS}/{m.design.name}/{name}" for m in STUDY.members]


rule study_report:
    input:
        study=config["study"],
        lock=f"{config['study']}.lock",
        members=[str(m.design.path) for m in STUDY.members],
        decisions=member_files("decision.json"),
        phase2s=member_files("phase2.json"),
        upstream=member_files("decision.manifest.json")
        + member_files("phase2.manifest.json"),
    output:
        md=report(
            f"{S}/validation.md",
            category="Study",
            caption="../report/study.rst",
        ),
        json=f"{S}/validation.json",
        table=f"{S}/validation_arms.parquet",
        figure=report(
            f"{S}/probe_vs_gain.png",
            category="Study",
            caption="../report/study.rst",
        ),
        manifest=f"{S}/validation.manifest.json",
    log:
        f"{S}/logs/study_report.log",
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/study_report.py"
