"""Plotly figure for the successors suite: each variant's held-out pretraining curve against input tokens
or against training minutes, one line per variant.

Takes curves as {label: [(x, accuracy in 0..1), ...]} (bertlab.ablations.successors_record.SuccessorsRecord.curve
or a run's RunProgress.curve); returns a plotly figure. Nothing here runs a model. Never imports streamlit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from bertlab.figures.answers import style_figure

X_AXES = {"tokens": ("input tokens (M)", 1e6), "train_s": ("training minutes", 60.0)}


def curves_figure(
    curves: Mapping[str, Sequence[tuple[float, float]]], x: str = "tokens", metric: str = "held-out masked-LM accuracy"
) -> go.Figure:
    """One line per variant: x ("tokens" or "train_s") against the metric in %."""
    title, scale = X_AXES[x]
    fig = go.Figure()
    for label, points in curves.items():
        if points:
            fig.add_trace(
                go.Scatter(
                    x=[a / scale for a, _ in points],
                    y=[100 * b for _, b in points],
                    mode="lines+markers",
                    marker={"size": 4},
                    name=label,
                    hovertemplate=f"{label}<br>%{{x:.1f}} {title.split(' (')[0]}<br>%{{y:.1f}}%<extra></extra>",
                )
            )
    fig.update_layout(
        xaxis_title=title, yaxis_title=f"{metric} (%)", height=380, legend={"orientation": "h", "y": -0.25}
    )
    return style_figure(fig)
