# The configured design's pages again at the repository root, rendered for that folder (links from the
# root); the per-design folders under results/ stay as they are. A local rule: it only re-renders.
rule root_decision:
    input:
        **prereg_files(),
        record=design_page("decision")["json"],
        # Pages the copy links to, built first so that every link resolves; compute.md is not read.
        linked=f"{R}/compute.md",
    output:
        **root_page("decision"),
    log:
        f"{R}/logs/root_decision.log",
    # Bookkeeping: runs where Snakemake runs, not as a cluster job.
    localrule: True
    conda:
        "../envs/grpo-probe.yaml"
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/root_decision.py"
