"""What the "Which heads matter" page draws: head importance as a heatmap, accuracy as heads are pruned, and
the commands that made a committed result (`recipe_for`). The pages only place them.

Imports numpy, plotly, bertlab.figures.answers (the shared look) and bertlab.interpret.heads (the pruning
curve); never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from bertlab.figures.answers import style_figure
from bertlab.interpret.heads import PruningCurve


def importance_figure(scores: np.ndarray, title: str = "", removed: Sequence[tuple[int, int]] = ()) -> go.Figure:
    """(L, A) head importance as a heatmap, layer 1 on top. Heads `removed` from the weights (a
    pruned model) are blank cells marked "removed", not an importance of 0."""
    s = np.asarray(scores, dtype=np.float64).copy()
    L, A = s.shape
    for layer, head in removed:
        s[layer, head] = np.nan
    fig = go.Figure(
        go.Heatmap(
            z=s,
            x=[f"head {a + 1}" for a in range(A)],
            y=[f"layer {i + 1}" for i in range(L)],
            colorscale="Oranges",
            zmin=0,
            colorbar=dict(title=dict(text="importance", side="right"), thickness=12),
            hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>",
            text=np.where(np.isnan(s), "removed", np.round(s, 2).astype(str)),
            texttemplate="%{text}" if L * A <= 64 else None,
            hoverongaps=False,
        )
    )
    fig.update_yaxes(autorange="reversed")
    return style_figure(fig, title, height=max(260, 40 * L + 120))


def pruning_figure(curve: PruningCurve, metric: str = "accuracy", title: str = "") -> go.Figure:
    """Accuracy against the share of heads pruned: least important first, and random orders (mean and range)."""
    share = curve.share
    fig = go.Figure()
    fig.add_scatter(
        x=share + share[::-1],
        y=curve.random_max + curve.random_min[::-1],
        fill="toself",
        mode="lines",
        fillcolor="rgba(127,127,127,0.18)",
        line=dict(width=0),
        name=f"random orders (range of {curve.random_orders})",
        hoverinfo="skip",
    )
    fig.add_scatter(
        x=share, y=curve.random, name="random order (mean)", mode="lines+markers", line=dict(color="#7f7f7f")
    )
    fig.add_scatter(
        x=share, y=curve.by_importance, name="least important first", mode="lines+markers", line=dict(color="#d62728")
    )
    fig.update_xaxes(title="share of heads pruned", tickformat=".0%")
    fig.update_yaxes(title=metric, tickformat=".0%")
    return style_figure(fig, title, height=380, legend=dict(orientation="h", y=-0.3))


def recipe_for(readme: str, file_name: str) -> str:
    """The commands that made `file_name`, from a results README: the block of lines that starts with
    the comment naming it (`# heads-sst2.json: ...`) and ends at the next blank line or fence ("" if none)."""
    lines = readme.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#") and not line.startswith("##") and file_name in line:
            block = []
            for later in lines[i:]:
                if not later.strip() or later.startswith("```"):
                    break
                block.append(later)
            return "\n".join(block)
    return ""
