"""decision.md's figure files, named from the design alone, so the workflow can declare each one.

Why apart from drawing them (:mod:`grpo_probe.analysis.page.figure_set`): Snakemake must know every file a
job writes before it runs, so that a deleted figure is rebuilt like a deleted table. Which figures a
decision has follows from the design (its cells, each cell's head, whether it registers replays), not
from the data; this module states that rule in one place, without loading matplotlib, and the decision
job checks that what it drew is what was declared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grpo_probe.prereg import Prereg

__all__ = ["ALL_CELLS", "FigureFile", "figure_files", "figure_slug"]

ALL_CELLS = "all-cells"
"""The ``cell`` part of the figures that show every cell: ``<kind>_all-cells.png``."""


def figure_slug(cell: str) -> str:
    """A cell id made safe for a file name (every character outside ``[A-Za-z0-9_.-]`` becomes ``_``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", cell)


@dataclass(frozen=True)
class FigureFile:
    """One figure of decision.md: ``<kind>_<cell slug>.png`` under the design's ``figures/`` folder."""

    kind: str
    cell: str

    @property
    def name(self) -> str:
        return f"{self.kind}_{figure_slug(self.cell)}.png"


def figure_files(prereg: Prereg) -> list[FigureFile]:
    """Every figure the decision job draws for ``prereg``, in a stable order.

    Each cell has its group-std, competence and trajectory figures; a design with replays adds each
    cell's chaos figure; an AR cell adds its token-entropy figure. The all-cells figures are the rule's
    clauses, the group std by cell, the competence by cell and the guard rates.
    """
    files = []
    for cell in prereg.enabled_cells:
        kinds = ["group_std", "competence", "trajectories"]
        if prereg.replay is not None:
            kinds.append("chaos")
        if cell.head == "ar":
            kinds.append("entropy")
        files.extend(FigureFile(kind, cell.id) for kind in kinds)
    kinds = ("rule", "group_std", "competence", "guard_rates")
    files.extend(FigureFile(kind, ALL_CELLS) for kind in kinds)
    return files
