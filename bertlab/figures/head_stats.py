"""Plotly figures of head statistics (Clark et al. 2019: how much each head attends to [CLS], [SEP], the
next or previous token, and its entropy): one statistic for every head (`stat_heatmap`), or all of them
side by side (`stats_overview`).

Takes `HeadStats` (bertlab.attention) and returns plotly figures; nothing here runs the model. Imports
numpy, plotly, bertlab.attention, bertlab.figures.answers (the shared look) and bertlab.figures.attention
(the colour scale's top); never streamlit.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.attention import HEAD_STATS, HeadStats
from bertlab.errors import InputError
from bertlab.figures.answers import style_figure
from bertlab.figures.attention import scale_top


def stat_heatmap(stats: HeadStats, name: str, title: str = "") -> go.Figure:
    """One statistic for every head: an L x A heatmap with the value written in each cell."""
    if name not in stats.values:
        raise InputError(f"unknown statistic {name!r}; choose one of {', '.join(HEAD_STATS)}")
    v = stats.values[name]
    L, A = v.shape
    is_share = name != "entropy"
    text = [["off" if np.isnan(x) else (f"{x:.0%}" if is_share else f"{x:.2f}") for x in row] for row in v]
    fig = go.Figure(
        go.Heatmap(
            z=v,
            x=list(range(1, A + 1)),
            y=list(range(1, L + 1)),
            text=text,
            texttemplate="%{text}" if L * A <= 256 else None,
            colorscale="Viridis" if not is_share else "Blues",
            zmin=0,
            zmax=1 if is_share else scale_top(v, 1.0),
            colorbar=dict(thickness=12, tickformat=".0%" if is_share else ".1f"),
            hovertemplate="layer %{y}, head %{x}: %{text}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_xaxes(title="head", tickvals=list(range(1, A + 1)), side="top")
    fig.update_yaxes(title="layer", tickvals=list(range(1, L + 1)), autorange="reversed")
    return style_figure(fig, title or HEAD_STATS[name][0], height=max(220, 60 + 34 * L))


def stats_overview(stats: HeadStats, title: str = "") -> go.Figure:
    """All of Clark et al.'s statistics side by side, one small L x A map each."""
    names = list(HEAD_STATS)
    fig = make_subplots(
        rows=1, cols=len(names), subplot_titles=[HEAD_STATS[n][0] for n in names], horizontal_spacing=0.02
    )
    L, A = stats.shape
    for k, name in enumerate(names, 1):
        v = stats.values[name]
        share = name != "entropy"
        fig.add_trace(
            go.Heatmap(
                z=v,
                x=list(range(1, A + 1)),
                y=list(range(1, L + 1)),
                colorscale="Blues" if share else "Viridis",
                zmin=0,
                zmax=1 if share else scale_top(v, 1.0),
                # one bar for the shares (all 0-100%), one for the entropy (bits)
                showscale=(k == 1) or not share,
                colorbar=dict(
                    thickness=10,
                    len=1.0,
                    x=1.0 if share else 1.07,
                    title=dict(text="share" if share else "bits", side="top"),
                    tickformat=".0%" if share else ".1f",
                ),
                hovertemplate=f"{HEAD_STATS[name][0]}<br>layer %{{y}}, head %{{x}}: %{{z:.2f}}<extra></extra>",
                xgap=1,
                ygap=1,
            ),
            row=1,
            col=k,
        )
        fig.update_yaxes(
            autorange="reversed",
            showticklabels=(k == 1),
            row=1,
            col=k,
            tickvals=list(range(1, L + 1)),
            title_text="layer" if k == 1 else None,
        )
        # head numbers under every panel (every head when they fit, else first / middle / last)
        ticks = list(range(1, A + 1)) if A <= 8 else sorted({1, (A + 1) // 2, A})
        fig.update_xaxes(tickvals=ticks, tickfont_size=9, row=1, col=k, title_text="head" if k == 1 else None)
    fig.update_annotations(font_size=12)
    style_figure(fig, title, height=max(220, 110 + 22 * L))
    fig.update_layout(margin=dict(t=60 if title else 30, r=90))
    return fig
