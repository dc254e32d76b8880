"""Small helpers shared by the plot modules: the lazy matplotlib import, a new figure's axes, the
limits on lines and panels, and line colours and legends.

Nothing here imports matplotlib at import time (only when a function is called).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.legend import Legend

_INSTALL = "matplotlib is needed for plots: pip install 'jaxshuffle[plot]' (or pip install matplotlib)"

#: At most this many labelled lines of one kind (values of n, or of eps0) in a panel.
MAX_LINES = 8

#: At most this many facets (rows of panels) in :func:`summary_figure`.
MAX_FACETS = 12


def require_matplotlib() -> ModuleType:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise ImportError(_INSTALL) from exc
    return matplotlib


def new_ax() -> Axes:
    require_matplotlib()
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(6.4, 4.6), layout="constrained")
    return ax


def line_colors(values: ArrayLike) -> list[tuple[float, float, float, float]]:
    """viridis colour of each value by its log position among ``values`` (one colour per n across panels)."""
    require_matplotlib()
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    v = np.asarray(values, dtype=np.float64)
    t = np.log(v) if v.size and v.min() > 0 else v
    span = (t.max() - t.min()) if t.size else 0.0
    return [cmap(0.9 * ((x - t.min()) / span if span > 0 else 0.0)) for x in t]


def lines_legend(ax: Axes, lines: int, entries: tuple[list[Artist], list[str]] | None = None,
                  title: str | None = None) -> Legend:
    """Legend of a panel with ``lines`` coloured lines: inside for a few, outside on the right for more.

    ``entries``: ``(handles, labels)`` of the legend (default: the axes' labelled artists)."""
    kw: dict[str, Any]
    if lines > 4:
        kw = dict(fontsize=7.5, title=title, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0, frameon=False)
    else:
        kw = dict(fontsize=8, title=title, title_fontsize=8, loc="best")
    return ax.legend(*entries, **kw) if entries is not None else ax.legend(**kw)


def _whole_figure(drawing: Axes | Figure) -> Figure:
    """The Figure that holds ``drawing`` (an Axes, or a Figure itself); an axes of a SubFigure has no
    figure of its own to save, and gets the AttributeError matplotlib would give."""
    from matplotlib.figure import Figure

    fig = drawing if isinstance(drawing, Figure) else drawing.figure
    if not isinstance(fig, Figure):
        raise AttributeError(f"{type(fig).__name__!r} object has no attribute 'savefig'")
    return fig


def png_bytes(drawing: Axes | Figure, software: str, dpi: int = 150) -> bytes:
    """The PNG of the figure that holds ``drawing`` (an Axes, or a Figure), with ``software`` as its
    ``Software`` metadata: the mark by which the command line recognises a figure file it wrote and may
    replace. A figure pyplot manages is closed after (a command draws many in one process)."""
    import io

    fig = _whole_figure(drawing)
    data = io.BytesIO()
    fig.savefig(data, format="png", dpi=dpi, metadata={"Software": software})
    if getattr(fig.canvas, "manager", None) is not None:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return data.getvalue()


def savefig(ax: Axes, path: str | os.PathLike[str], dpi: int) -> None:
    """Save the figure that holds ``ax`` to ``path`` (an axes of a SubFigure has no figure of its own to save)."""
    _whole_figure(ax).savefig(path, dpi=dpi)
