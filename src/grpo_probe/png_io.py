"""A matplotlib figure as PNG bytes that depend only on what is drawn: the one PNG encoder of the package.

Why one module, at the bottom of the package: decision.md's and a study's figures
(:mod:`grpo_probe.analysis.page.figure_canvas`), phase 2's learning curves (:mod:`grpo_probe.phase2.report`)
and the boat's trajectory figure (:mod:`grpo_probe.envs.boat.plot`) must each give an auditor's rerun the
same bytes, and the layers keep the environments from importing the analysis. So the encoding lives
below all of them: the Agg canvas (a figure made without pyplot has none that can print) and no
``Software`` metadata, whose matplotlib version stamp would change the bytes with the installed
matplotlib. What differs between the sites (the dpi, the style, the size) stays with the site.
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

__all__ = ["png_bytes"]


def png_bytes(fig: Figure, dpi: float) -> bytes:
    """``fig`` as PNG bytes at ``dpi``, without the software/version metadata.

    A figure that has no Agg canvas (one made with ``Figure(...)`` rather than pyplot) is given one; a
    pyplot figure keeps its own, so pyplot can still close it.
    """
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()
