"""A run's curves: loss, accuracy and learning rate against the step, in one plotly figure with a shared
legend (`curves_figure`), drawn from its metric lines (bertlab.jobs.metric_lines).

Imports plotly and bertlab.figures.answers (colours) / jobs.metric_lines; never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.figures.answers import BLUE, FONT, GREY, ORANGE
from bertlab.jobs.metric_lines import chance_of, finite, score_keys, score_name, split_metrics

GREEN = "#3b8f5a"


def _series(lines: Sequence[dict], key: str) -> tuple[list[int], list[float]]:
    pts = [(m["step"], m[key]) for m in lines if finite(m.get(key))]
    return [p[0] for p in pts], [p[1] for p in pts]


def _line_mode(x: Sequence) -> str:
    return "lines" if len(x) > 2 else "lines+markers"  # one or two points: a line alone would not show


def curves_figure(metrics: Sequence[dict], title: str = "", chance: dict[str, float] | None = None) -> go.Figure | None:
    """Loss, accuracy and learning rate against the step, train lines solid, eval points dashed;
    the step axis from 0 (one point is not a lonely dot on a 19-21 axis); `chance`: a dotted
    line at what guessing scores for each accuracy shown (see `chance_levels`), named in the legend.

    The panels share one legend, so no two traces share a colour and dash there: a score is one
    colour, solid for train and dashed for eval; an eval loss that is not the train loss's quantity
    (pretraining's 'mlm loss' beside the MLM + NSP 'loss') has a colour of its own."""
    train, evals = split_metrics(metrics)
    if not train and not evals:
        return None
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=("Loss", "Accuracy", "Learning rate"),
        horizontal_spacing=0.07,
        shared_xaxes="all",
    )  # one step axis: a lone eval point sits where it belongs
    x, y = _series(train, "loss")
    if x:
        fig.add_trace(go.Scatter(x=x, y=y, name="train loss", mode=_line_mode(x), line=dict(color=BLUE)), 1, 1)
    eval_loss = "loss" if any(finite(m.get("loss")) for m in evals) else "mlm_loss"
    x, y = _series(evals, eval_loss)
    if x:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                name=f"eval {eval_loss.replace('_', ' ')}",
                mode="lines+markers",
                line=dict(color=BLUE if eval_loss == "loss" else ORANGE, dash="dash"),
            ),
            1,
            1,
        )
    _add_score_traces(fig, train, evals)  # the middle panel
    x, y = _series(train, "lr")
    if x:
        fig.add_trace(go.Scatter(x=x, y=y, name="learning rate", mode=_line_mode(x), line=dict(color=GREY)), 1, 3)
    fig.update_xaxes(title_text="step", showgrid=True, gridcolor="#eee", rangemode="tozero")
    last_step = max([x for t in fig.data for x in (t.x or ()) if finite(x)], default=0)
    if last_step and last_step < 10:  # plotly's auto range around a few early steps still reads oddly
        fig.update_xaxes(range=[0, last_step * 1.1 + 1])
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    train_keys, eval_keys = score_keys(train, evals)
    drawn: set[float] = set()  # eval accuracy and train acc share one level: one line
    for key in [*eval_keys, *train_keys]:
        level = chance_of(key, chance or {})
        if level is not None and level not in drawn:
            drawn.add(level)
            fig.add_hline(y=level, line=dict(color=GREY, dash="dot"), row=1, col=2)
            # named in the legend, not on the plot: a label beside the line covered the scores near
            # chance that it is there to judge (an untrained model's NSP accuracy sits on it)
            fig.add_trace(
                go.Scatter(
                    x=[None],
                    y=[None],
                    name=f"chance ({score_name(key)}): {level:.0%}",
                    mode="lines",
                    line=dict(color=GREY, dash="dot"),
                    hoverinfo="skip",
                ),
                1,
                2,
            )
    scores = [v for t in fig.data if t.xaxis == "x2" for v in (t.y or ()) if finite(v)]  # not the chance entry
    fig.update_yaxes(
        tickformat=".0%",
        row=1,
        col=2,
        **({"range": [0, 1.02]} if scores and min(scores) >= 0 and max(scores) <= 1 else {}),
    )
    fig.update_yaxes(exponentformat="e", rangemode="tozero", row=1, col=3)  # warm-up and decay read from zero
    fig.update_layout(
        title=dict(text=title, x=0, xanchor="left", font=dict(size=15)) if title else None,
        font=FONT,
        height=340,
        plot_bgcolor="white",
        paper_bgcolor="white",
        margin=dict(l=10, r=10, t=50 if title else 30, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.22, x=0),
        hovermode="x unified",
    )
    return fig


# The accuracy panel's colours, one per score (not the loss panel's blue and orange, nor the grey
# of the learning rate and chance); past the sixth score, dotted lines tell the next six apart.
_SCORE_COLOURS = [GREEN, "#8e5bd0", "#c24d7c", "#2a9d8f", "#d64545", "#e8a33d"]
_SCORE_DASHES = [("solid", "dash"), ("dot", "dashdot")]  # (train, eval)


def _add_score_traces(fig: go.Figure, train: list[dict], evals: list[dict]) -> None:
    """The accuracy panel's lines: one colour per score, its train line solid and its eval line
    dashed (a fine-tuned classifier's train 'acc' and eval 'accuracy' are one score)."""
    train_keys, eval_keys = score_keys(train, evals)
    names = list(dict.fromkeys(score_name(k) for k in [*train_keys, *eval_keys]))

    def line(key: str, split: int) -> dict:
        n = names.index(score_name(key))
        colour, dashes = _SCORE_COLOURS[n % len(_SCORE_COLOURS)], _SCORE_DASHES[n // len(_SCORE_COLOURS) % 2]
        return dict(color=colour, dash=dashes[split])

    for key in train_keys:
        x, y = _series(train, key)
        fig.add_trace(
            go.Scatter(x=x, y=y, name=f"train {score_name(key)}", mode=_line_mode(x), line=line(key, 0)), 1, 2
        )
    for key in eval_keys:
        x, y = _series(evals, key)
        fig.add_trace(
            go.Scatter(x=x, y=y, name=f"eval {score_name(key)}", mode="lines+markers", line=line(key, 1)), 1, 2
        )
