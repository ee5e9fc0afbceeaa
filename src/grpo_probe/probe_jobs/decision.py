"""The analysis jobs of the probe: a cell's join, decision.md with its record and figures, compute.md,
and the configured design's decision.md rendered again at the repository root."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo_probe.atomic_io import atomic_write_text
from grpo_probe.compute import compute_report
from grpo_probe.compute.servers import read_server_bindings, server_compute
from grpo_probe.envs.episode_table import write_episode_table
from grpo_probe.envs.registry import env_spec
from grpo_probe.prereg import load_prereg
from grpo_probe.probe_jobs.sources import PathLike
from grpo_probe.provenance import file_sha256, write_design_manifest
from grpo_probe.provenance.manifest import read_manifest
from grpo_probe.rollout import merge_shards

__all__ = ["compute", "decision", "join", "root_decision", "served_arms"]


def join(
    prereg_path: PathLike,
    cell: str,
    shards: Sequence[PathLike],
    anchor_table: PathLike,
    upstream: Sequence[PathLike],
    cell_table: PathLike,
    joined: PathLike,
    manifest: PathLike,
) -> None:
    """Merge a cell's shards, then put each seed's group statistics next to its anchor row.

    The joined table is where the per-seed statistics decision.md reports are computed; the decision
    step reads them from it (:func:`grpo_probe.analysis.cells.joined.read_joined_table`).
    """
    # Local: the analysis tables load pyarrow.compute (about 35 ms), which only this job needs.
    from grpo_probe.analysis.cells.joined import JOIN_SCHEMA, join_cell, joined_table
    from grpo_probe.analysis.cells.tables import read_rollout_table as read_analysed

    prereg = load_prereg(prereg_path)
    merge_shards(list(shards), cell_table)
    arm = prereg.cell(cell).arm
    env = env_spec(prereg.env)
    probe = read_analysed(cell_table, cell, arm, env=env)
    anchor = read_analysed(anchor_table, "anchor", arm, env=env)
    table = joined_table(join_cell(cell, probe, anchor, prereg.analysis))
    write_episode_table(joined, table, schema=JOIN_SCHEMA)
    write_design_manifest(prereg, manifest, "join", [cell_table, joined], upstream, {"cell": cell})


def decision(
    prereg_path: PathLike,
    cell_tables: Mapping[str, PathLike],
    anchor_tables: Mapping[str, PathLike],
    upstream: Sequence[PathLike],
    out_md: PathLike,
    out_json: PathLike,
    figures_dir: PathLike,
    manifest: PathLike,
    join_tables: Mapping[str, PathLike],
    out_tsv: PathLike | None = None,
    replay_tables: Mapping[str, Sequence[PathLike]] | None = None,
    gradient_files: Mapping[str, PathLike] | None = None,
    figures: Sequence[PathLike] | None = None,
) -> None:
    """decision.md, decision.json, the reads table and the figures, from the joined cells and the anchors.

    The per-seed group statistics are read from ``join_tables`` (the join rule's output), not recomputed;
    the cell tables give the guard trips, the AR entropy and the figures. The provenance footer lists
    every file the decision read (cell, join and anchor tables, the prereg and its lock) with its sha256.
    ``figures``: the figure files the workflow declared (:func:`grpo_probe.analysis.page.figure_names.
    figure_files`); the job clears any other figure from ``figures_dir`` first and checks that it drew
    exactly these, so the DAG knows every file the job writes.
    """
    # Local: the report loads matplotlib and jinja2 (about 0.4 s), which only the decision jobs need.
    from grpo_probe.analysis.page.report import decision_record, reads_tsv_text, write_decision

    prereg = load_prereg(prereg_path)
    declared = None if figures is None else {Path(p).resolve() for p in figures}
    if declared is not None and Path(figures_dir).is_dir():
        for stale in Path(figures_dir).rglob("*.png"):  # another design version's figure, not declared
            if stale.resolve() not in declared:
                stale.unlink()
    replays = {cell: list(paths) for cell, paths in (replay_tables or {}).items()}
    read = [
        *cell_tables.values(),
        *join_tables.values(),
        *anchor_tables.values(),
        *(p for paths in replays.values() for p in paths),
        *(gradient_files or {}).values(),
    ]
    provenance = [(str(path), file_sha256(path)) for path in read]
    record = decision_record(
        probe_tables=dict(cell_tables),
        anchor_tables=dict(anchor_tables),
        prereg=prereg,
        page_dir=Path(out_md).parent,
        figures_dir=figures_dir,
        provenance=sorted(set(provenance)),
        join_tables=dict(join_tables),
        replay_tables=replays if prereg.replay is not None else None,
        gradient_files=dict(gradient_files) if prereg.analysis.gradient_reads else None,
    )
    # The design's files are named as the workflow names them (relative to its directory), not relative
    # to the page: they live outside the results folder, so these bytes do not depend on where it is.
    design = [prereg.path, Path(f"{prereg.path}.lock")]
    record = {**record, "design_files": [{"path": str(p), "sha256": file_sha256(p)} for p in design]}
    served = served_arms(upstream)
    if served:  # only then: an in-process design's record (and its pinned bytes) is as it was
        record["served_arms"] = served
    write_decision(_decision_paths(record, _relative_to(Path(out_md).parent), str), out_md, out_json)
    outputs: list[PathLike] = [out_md, out_json]
    if out_tsv is not None:
        atomic_write_text(out_tsv, reads_tsv_text(record))
        outputs.append(out_tsv)
    drawn = sorted(Path(figures_dir).rglob("*.png"))
    if declared is not None and {p.resolve() for p in drawn} != declared:
        missing = sorted(str(p) for p in declared - {p.resolve() for p in drawn})
        extra = sorted(str(p) for p in drawn if p.resolve() not in declared)
        raise ValueError(
            f"{figures_dir}: the figures drawn are not those the workflow declared (declared, not drawn: "
            f"{missing}; drawn, not declared: {extra}); grpo_probe.analysis.page.figure_names.figure_files "
            "names every figure a design has"
        )
    write_design_manifest(prereg, manifest, "decision", [*outputs, *drawn], upstream)


def served_arms(upstream: Sequence[PathLike]) -> dict[str, dict[str, Any]]:
    """The arms bound to a policy server, each with what its server declares (``capabilities``, None when
    it declares none; the served policy's name, its ``type``, its ``checkpoint_sha256`` and the ``sampler``
    it draws with, each None where the server declares none): read from the ``bind_server`` manifests up
    the chain from ``upstream``, whose paths are relative to the working directory, as the workflow writes
    them.

    Why: decision.md's recommendation for an arm depends on whether phase 2 can train it, and phase 2
    trains only checkpoints it holds; a served arm's page says what its server declares instead. Neither
    the address nor anything else that changes between runs is kept, so a rerun's bytes are the same.
    """
    found: dict[str, dict[str, Any]] = {}
    seen: set[Path] = set()
    stack = [Path(p) for p in upstream]
    while stack:
        path = stack.pop()
        if path.resolve() in seen or not path.is_file():
            continue
        seen.add(path.resolve())
        manifest = read_manifest(path)
        if manifest["rule"] == "bind_server":
            extra = manifest["extra"]
            server = extra.get("server") or {}
            found[extra["arm"]] = {
                "capabilities": extra.get("capabilities"),
                # what the page says the arm is: the served policy, its type and checkpoint as the server
                # declares them, and the sampler it draws with (None where it declares none)
                "policy": extra.get("policy"),
                "type": server.get("lerobot_type") or server.get("policy_type"),
                "checkpoint_sha256": extra.get("checkpoint_sha256"),
                "sampler": server.get("sampler"),
            }
        stack += [Path(entry["path"]) for entry in manifest.get("inputs", ())]
    return dict(sorted(found.items()))


def compute(prereg_path: PathLike, benchmarks: PathLike, out_md: PathLike, out_json: PathLike) -> None:
    """Compute per stage against the registered gate (a report that varies by run, so not in the chain)."""
    prereg = load_prereg(prereg_path)
    servers = server_compute(read_server_bindings(Path(benchmarks).parent))  # the servers bound in this run
    compute_report(prereg, benchmarks, out_md, out_json, servers=servers)


# -- decision.md's file paths, and its copy at the repository root ---------------------------------------
_CELL_TABLES = ("probe_table", "anchor_table", "join_table")
"""The fields of each decision.json cell that name a table; the provenance footer names the rest."""

_SIBLING_PAGES = ("compute.md",)
"""Pages decision.md links literally rather than through decision.json (compute.md beside it), each written
for the design's folder and moved with the page."""


def _relative_to(folder: Path) -> Callable[[str], str]:
    """A path as the workflow gives it (relative to the working directory) -> relative to ``folder``."""
    return lambda path: Path(os.path.relpath(path, folder)).as_posix()


def _moved(source_dir: Path, target_dir: Path) -> Callable[[str], str]:
    """A path relative to ``source_dir`` -> the same file relative to ``target_dir``."""
    return lambda path: Path(os.path.relpath(source_dir / path, target_dir)).as_posix()


def _decision_paths(
    record: Mapping[str, Any], tables: Callable[[str], str], figures: Callable[[str], str]
) -> dict[str, Any]:
    """decision.json with its file paths mapped: ``tables`` for every table (each cell's and the provenance
    footer's), ``figures`` for the figure links.

    Why: decision.md and decision.json name files relative to their own folder, so where ``results:``
    points changes none of their bytes, and a copy rendered for another folder only moves its paths.
    """
    out = json.loads(json.dumps(record))
    for cell in out["cells"]:
        for key in _CELL_TABLES:
            if cell.get(key) is not None:
                cell[key] = tables(cell[key])
        cell["figures"] = {name: figures(path) for name, path in cell["figures"].items()}
    out["figures"] = {name: figures(path) for name, path in out["figures"].items()}
    provenance = [{**entry, "path": tables(entry["path"])} for entry in out["provenance"]]
    out["provenance"] = sorted(provenance, key=lambda entry: (entry["path"], entry["sha256"]))
    return out


def root_decision(prereg_path: PathLike, record: PathLike, out_md: PathLike, out_json: PathLike) -> None:
    """The configured design's decision.md and decision.json again, rendered for another folder.

    Why rendered and not copied: the design's pages link figures, tables and compute.md relative to their
    own folder (``results/<design>/``), so a byte copy at the repository root would link nowhere. The copy
    opens with the design's name, its prereg and its folder, and records the sha256 of the decision.json it
    was rendered from (the one in the manifest chain ``grpo-probe verify`` walks); it is a view, not a link
    of that chain. A record of another design than the configured prereg is refused.
    """
    # Local: the report loads matplotlib and jinja2 (about 0.4 s), which only the decision jobs need.
    from grpo_probe.analysis.page.decision_md import VALIDATION_PAGE
    from grpo_probe.analysis.page.report import write_decision

    prereg = load_prereg(prereg_path)
    source = Path(record)
    target_dir = Path(out_md).parent
    decision = json.loads(source.read_text(encoding="utf-8"))
    if decision["prereg"]["sha256"] != prereg.sha256:
        raise ValueError(
            f"{source}: prereg.sha256 {decision['prereg']['sha256']} is not the sha256 {prereg.sha256} of "
            f"{prereg.path}, the configured design"
        )
    moved = _moved(source.parent, target_dir)
    out = _decision_paths(decision, moved, moved)
    design, folder, page = decision["prereg"]["name"], moved("."), moved(source.name)
    out["rendered_from"] = {
        "design": design,
        "prereg": Path(prereg.path).as_posix(),
        "folder": folder,
        "decision_json": page,
        "sha256": file_sha256(source),
    }
    footer = (
        f"\n> Design **{design}** (`{out['rendered_from']['prereg']}`), run in [`{folder}/`]({folder}/): "
        f"this page is rendered here from [`{page}`]({page}) (sha256 `{out['rendered_from']['sha256']}`), "
        "with every link relative to this folder.\n"
    )

    def for_this_folder(text: str) -> str:
        for name in _SIBLING_PAGES:  # the template writes these links literally, for the design's folder
            text = text.replace(f"]({name})", f"]({moved(name)})")
        # the validation study, named from the repository root (the working directory) on the design's page,
        # is a link on this one: its folder is fixed where the design's folder moves with ``results:``
        validation = Path(os.path.relpath(VALIDATION_PAGE, target_dir)).as_posix()
        named = rf"the(\s+)validation(\s+)study,\s+`{re.escape(VALIDATION_PAGE)}`"  # wrapped anywhere
        text = re.sub(named, rf"the\1[validation\2study]({validation})", text)
        return text.rstrip("\n") + "\n" + footer  # after the hashes it belongs with

    write_decision(out, out_md, out_json, edit=for_this_folder)
