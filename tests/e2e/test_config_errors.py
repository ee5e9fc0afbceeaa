"""A bad run setting is reported with its field and the place that set it, not as Snakemake's schema dump."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e]


def test_a_bad_config_value_names_the_key_and_the_command_line(fresh_copy: Path, snakemake) -> None:
    proc = snakemake(fresh_copy, "-n", "--config", "workers=abc")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "--config: workers: 'abc' is not of type 'integer'" in out
    assert "Error validating config file" not in out
    assert not (fresh_copy / "results").exists()


def test_a_bad_configfile_value_names_the_file(fresh_copy: Path, tmp_path: Path, snakemake) -> None:
    extra = tmp_path / "cluster.yaml"
    extra.write_text("seeds_per_shard: 0\n")
    proc = snakemake(fresh_copy, "-n", "--configfile", str(extra))
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert f"--configfile {extra}: seeds_per_shard: 0 is less than the minimum of 1" in out


def test_a_bad_value_in_the_shipped_config_names_config_yaml(fresh_copy: Path, snakemake) -> None:
    config = fresh_copy / "config" / "config.yaml"
    config.write_text(config.read_text().replace("\ndevice: cpu\n", "\ndevice: tpu\n"))
    proc = snakemake(fresh_copy, "-n")
    assert proc.returncode != 0
    assert "config/config.yaml: device: 'tpu' is not one of ['cpu', 'cuda']" in proc.stdout + proc.stderr


def test_a_copied_design_lists_every_problem_without_snakemakes_heading(fresh_copy: Path, snakemake) -> None:
    """The message is the reader's input, each problem once, not Snakemake's "in file common.smk, line N"
    heading with a traceback into the package."""
    smoke = (fresh_copy / "prereg" / "smoke.yaml").read_text()
    (fresh_copy / "prereg" / "mine.yaml").write_text(
        smoke.replace("  signal_bar_cm: 0.25", "  signal_bar_cm: x")
    )
    proc = snakemake(fresh_copy, "-n", "--config", "prereg=prereg/mine.yaml")
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "prereg/mine.yaml: 3 problems, all to fix before anything runs:" in out
    assert "common.smk" not in out and "Traceback" not in out and 'File "' not in out
    assert not (fresh_copy / "results").exists()
