"""How a model learned: its answers, attention and head statistics at snapshots taken while it trained.

Owns `learning_history.json` (this module is its only reader and writer): the probe inputs, the
held-out learning curve and a thinned train-loss curve, and for every snapshot the model's
fill-mask top-5 on the probe sentences, P(IsNext) on probe pairs, attention maps of the probe
attention sentences and Clark et al.'s head statistics averaged over them. Format 2 keeps every
probability to 4 significant figures; format 1 kept them to 4 decimal places (an early model's
0.012% read 0.01%, and 0.02349 became 0.0235), and is still read: a folder that has the snapshots
is probed again, one without them (a shipped checkpoint) keeps it and says so (`coarse_probabilities`).

A pretraining run with `train.snapshots: true` keeps fp16 checkpoints at log-spaced steps under
`RUN/snapshots/step-NNNNNNN/` (see bertlab.storage.runfolder). `build_history` runs the probes through each
of them once and the file is saved in the run folder; `bertlab export` copies it beside a shipped
checkpoint, so the history of the shipped model needs no snapshots at all.

Imports bertlab.attention, bertlab.atomic, bertlab.inference and bertlab.storage.runfolder (file names,
snapshot folders and metrics); never streamlit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from bertlab.atomic import read_json, write_text_atomic
from bertlab.attention import HEAD_STATS, head_statistics
from bertlab.errors import InputError
from bertlab.storage.runfolder import list_snapshots, read_metrics

if TYPE_CHECKING:
    from bertlab.inference import LoadedModel

HISTORY_FILE = "learning_history.json"
FORMAT_VERSION = 2
SIGNIFICANT_DIGITS = 4  # of each stored probability: 0.0001234 keeps its digits, as 0.4213 does


def _kept(p: float) -> float:
    """A probability as the history stores it: 4 significant figures, however small."""
    return float(f"{float(p):.{SIGNIFICANT_DIGITS}g}")


@dataclass(frozen=True)
class Probes:
    """The fixed inputs every snapshot is asked about."""

    fill_mask: tuple[str, ...] = (
        "I drank a cup of [MASK] this morning.",
        "The capital of France is [MASK].",
        "She opened the door and [MASK] into the room.",
        "He [MASK] the ball to his brother.",
        "It was a dark and stormy [MASK].",
        "The children were playing in the [MASK].",
        "My father [MASK] a doctor in London.",
    )
    pairs: tuple[tuple[str, str, bool], ...] = (  # (A, B, B really follows A)
        ("She opened the door and walked in.", "The room was dark and quiet.", True),
        ("I forgot my umbrella at home.", "Of course, it started to rain.", True),
        ("She opened the door and walked in.", "Water boils at one hundred degrees.", False),
        ("I forgot my umbrella at home.", "The museum opens at nine.", False),
    )
    attention: tuple[str, ...] = (
        "The cat sat on the mat because it was tired.",
        "She gave the book to her brother, and he read it at night.",
    )


DEFAULT_PROBES = Probes()


@dataclass
class SnapshotProbe:
    """What the model at one snapshot says about the probes.

    Attributes:
        fill_mask: per probe sentence, the top-5 (word, probability) for its [MASK].
        nsp: per probe pair, P(IsNext); empty for models without an NSP head.
        attention: per attention sentence, {"tokens": [...], "permille": (L, A, T, T) nested lists
            of attention probabilities x 1000, rounded (`attention_maps` gives them back as floats);
            the tokens as a page draws them (`readable_tokens`: RoBERTa's 'Ġcat' is kept as '␣cat').
        head_stats: statistic name (bertlab.attention.HEAD_STATS) -> (L, A) nested lists,
            averaged over the attention sentences.
        stage: which pretraining stage took it (2 and on: runs continued from the model so far).
    """

    step: int
    tokens: int
    train_s: float | None
    metrics: dict[str, float]
    fill_mask: list[list[tuple[str, float]]]
    nsp: list[float]
    attention: list[dict]
    head_stats: dict[str, list[list[float]]]
    stage: int = 1

    def attention_maps(self, sentence: int) -> tuple[list[str], np.ndarray]:
        a = self.attention[sentence]
        return list(a["tokens"]), np.asarray(a["permille"], dtype=np.float32) / 1000.0

    def stats_array(self, name: str) -> np.ndarray:
        return np.asarray(self.head_stats[name], dtype=np.float32)


@dataclass
class LearningHistory:
    """A run's learning history: curves plus one SnapshotProbe per snapshot, in step order."""

    probes: Probes
    curve: list[dict]  # held-out evaluations: step, tokens, train_s, mlm_acc, mlm_loss, nsp_acc
    train_curve: list[dict]  # thinned train log: step, tokens, loss
    snapshots: list[SnapshotProbe] = field(default_factory=list)
    source: str = ""
    format_version: int = FORMAT_VERSION  # of the file it was read from (1: probabilities to 4 decimals)

    @property
    def coarse_probabilities(self) -> bool:
        """True when its probabilities were stored to 4 decimal places (format 1), so the last
        digit shown can differ from a fresh run of the same model, and small ones read '<0.01%'."""
        return self.format_version < 2

    @property
    def steps(self) -> list[int]:
        return [s.step for s in self.snapshots]

    def at(self, step: int) -> SnapshotProbe:
        """The snapshot at `step`, or the last one before it."""
        if not self.snapshots:
            raise InputError("this history holds no snapshots")
        before = [s for s in self.snapshots if s.step <= step]
        return before[-1] if before else self.snapshots[0]


# --------------------------------------------------------------------------------------
# Snapshots of a run
# --------------------------------------------------------------------------------------
def probe_model(lm: LoadedModel, probes: Probes = DEFAULT_PROBES, card: dict | None = None) -> SnapshotProbe:
    """Run the probes through one loaded model (a `bertlab.inference.LoadedModel`)."""
    card = card or {}
    fills = []
    for result in lm.fill_mask(list(probes.fill_mask), top_k=5, joint=False):
        cands = result.masks[0].candidates if result.masks else []
        fills.append([(c.word, _kept(c.score)) for c in cands])
    nsp = []
    if lm.has_nsp:
        results = lm.next_sentence([a for a, _, _ in probes.pairs], [b for _, b, _ in probes.pairs])
        nsp = [_kept(r.is_next_prob) for r in results]
    attention, sums, counts = [], {}, 0
    for text in probes.attention:
        ins = lm.inspect(text)
        permille = np.rint(np.asarray(ins.attentions, dtype=np.float64) * 1000).astype(int)  # compact on disk
        attention.append({"tokens": lm.tokenizer.readable_tokens(ins.tokens), "permille": permille.tolist()})
        stats = head_statistics(ins.attentions, ins.tokens)
        n = len(ins.tokens)
        for name, v in stats.values.items():
            sums[name] = sums.get(name, 0) + np.nan_to_num(v) * n
        counts += n
    head_stats = {
        name: np.round((sums[name] / max(1, counts)).astype(np.float64), 4).tolist()
        for name in HEAD_STATS
        if name in sums
    }
    metrics = {k: float(v) for k, v in (card.get("metrics") or {}).items() if isinstance(v, (int, float))}
    return SnapshotProbe(
        step=int(card.get("steps", 0)),
        tokens=int(card.get("tokens", 0)),
        train_s=card.get("train_time_s"),
        metrics=metrics,
        fill_mask=fills,
        nsp=nsp,
        attention=attention,
        head_stats=head_stats,
    )


def run_curves(run_dir: str | Path, max_train_points: int = 300) -> tuple[list[dict], list[dict]]:
    """(held-out curve, thinned train-loss curve) from a run's metrics.jsonl."""
    records = read_metrics(run_dir)
    curve = [
        {
            "step": r["step"],
            "tokens": r["tokens"],
            "train_s": r.get("train_s"),
            **{k: round(float(r[k]), 4) for k in ("mlm_acc", "mlm_loss", "nsp_acc") if k in r},
        }
        for r in records
        if r.get("split") == "eval"
    ]
    train = [r for r in records if r.get("split") == "train"]
    every = max(1, len(train) // max_train_points)
    train_curve = [
        {"step": r["step"], "tokens": r["tokens"], "loss": round(float(r["loss"]), 4)}
        for i, r in enumerate(train)
        if i % every == 0 or i == len(train) - 1
    ]
    return curve, train_curve


def build_history(
    run_dir: str | Path, probes: Probes = DEFAULT_PROBES, progress: Callable[[int, int], None] | None = None
) -> LearningHistory:
    """Probe every snapshot of a run (one model at a time) and gather its curves.

    Raises:
        InputError: the folder kept no snapshots.
    """
    from bertlab.inference import load_model  # deferred: torch, only when snapshots are probed

    snaps = list_snapshots(run_dir)
    if not snaps:
        raise InputError(
            f"{run_dir}: this run kept no snapshots; start a run with train.snapshots=true "
            "(the Train page's 'Keep snapshots' option)"
        )
    curve, train_curve = run_curves(run_dir)
    out = []
    for i, path in enumerate(snaps):
        lm = load_model(path, device="cpu")
        out.append(probe_model(lm, probes, read_json(path / "model_card.json") or {}))
        if progress is not None:
            progress(i + 1, len(snaps))
    return LearningHistory(probes, curve, train_curve, out, source=str(run_dir))


# --------------------------------------------------------------------------------------
# Stages: a run continued from a model (init_from) carries that model's history on
# --------------------------------------------------------------------------------------
def continue_points(earlier: Sequence[dict], later: Sequence[dict], offset: dict) -> list[dict]:
    """Curve points of two pretraining stages as one curve: `later`'s step, tokens and train_s are
    counted on from `offset` (the earlier model's totals: "step", "tokens", "train_s"), and every
    point says its stage (1 for points that name none)."""
    first = [{**p, "stage": p.get("stage", 1)} for p in earlier]
    stage = max((p["stage"] for p in first), default=0) + 1
    out = first
    for p in later:
        q = {**p, "stage": stage}
        for key in ("step", "tokens", "train_s"):
            if q.get(key) is not None and offset.get(key) is not None:
                q[key] = q[key] + offset[key]
        out.append(q)
    return out


def continue_history(earlier: LearningHistory, later: LearningHistory, offset: dict) -> LearningHistory:
    """One history across stages: the earlier model's snapshots, then `later`'s (a run that
    continued from that model) with steps, tokens and seconds counted on from `offset`.

    Raises:
        InputError: the two histories asked different probes, so their answers do not compare.
    """
    if earlier.probes != later.probes:
        raise InputError("the two stages' histories asked different probe sentences; they cannot be joined")
    seconds = offset.get("train_s") or 0.0
    stage = max((s.stage for s in earlier.snapshots), default=0) + 1
    snaps = list(earlier.snapshots) + [
        replace(
            s,
            stage=stage,
            step=s.step + offset["step"],
            tokens=s.tokens + offset["tokens"],
            train_s=None if s.train_s is None else s.train_s + seconds,
        )
        for s in later.snapshots
    ]
    return LearningHistory(
        earlier.probes,
        continue_points(earlier.curve, later.curve, offset),
        continue_points(earlier.train_curve, later.train_curve, offset),
        snaps,
        source=later.source,
        format_version=min(earlier.format_version, later.format_version),
    )


# --------------------------------------------------------------------------------------
# The file
# --------------------------------------------------------------------------------------
def save_history(history: LearningHistory, path: str | Path) -> Path:
    """Write `learning_history.json` (path: the file, or a folder to write it in)."""
    path = Path(path)
    if path.is_dir():
        path = path / HISTORY_FILE
    data = {
        "format": history.format_version,
        "source": history.source,
        "probes": asdict(history.probes),
        "curve": history.curve,
        "train_curve": history.train_curve,
        "snapshots": [asdict(s) for s in history.snapshots],
    }
    write_text_atomic(path, json.dumps(data, separators=(",", ":")))  # compact: nested attention lists stay small
    return path


def load_history(path: str | Path) -> LearningHistory:
    """Read `learning_history.json` from a file, checkpoint folder or run folder."""
    path = Path(path)
    file = path / HISTORY_FILE if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"{path}: no {HISTORY_FILE} (a run keeps one after its snapshots are probed)")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        version = int(data.get("format", 1))
        p = data["probes"]
        probes = Probes(tuple(p["fill_mask"]), tuple(tuple(x) for x in p["pairs"]), tuple(p["attention"]))
        snaps = [
            SnapshotProbe(**{**s, "fill_mask": [[tuple(c) for c in f] for f in s["fill_mask"]]})
            for s in data["snapshots"]
        ]
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{file}: not a learning history this version reads ({type(exc).__name__}: {exc})") from exc
    if version > FORMAT_VERSION:
        raise InputError(
            f"{file}: a learning history of format {version}, newer than this BERT Lab reads "
            f"({FORMAT_VERSION}); update BERT Lab, or delete the file to probe the snapshots again"
        )
    curve, train_curve = data.get("curve", []), data.get("train_curve", [])
    return LearningHistory(probes, curve, train_curve, snaps, data.get("source", ""), format_version=version)


def history_for(path: str | Path) -> LearningHistory | None:
    """The saved history of a checkpoint or run folder when it is there and covers every snapshot
    the folder holds (a run still training gains snapshots); None when it must be (re)built, which
    is also when it is of an older format and the snapshots to probe again are there."""
    path = Path(path)
    if not (path / HISTORY_FILE).is_file():
        return None
    history = load_history(path)
    snaps = list_snapshots(path)
    if history.format_version < FORMAT_VERSION and snaps:
        return None
    have = set(history.steps)
    for snap in snaps:
        if int(snap.name.split("-")[1]) not in have:
            return None
    return history


def history_stamp(path: str | Path) -> float:
    """The modification time of a folder's `learning_history.json` (0.0 when absent): it changes
    when the history is rebuilt, so a cache keyed on it reads the new one."""
    file = Path(path) / HISTORY_FILE
    return file.stat().st_mtime if file.is_file() else 0.0


def has_history(path: str | Path) -> bool:
    """True when the folder has a saved history or snapshots to build one from."""
    path = Path(path)
    return (path / HISTORY_FILE).is_file() or bool(list_snapshots(path))


def fill_mask_table(history: LearningHistory, step: int, share: Callable[[float], str]) -> list[dict]:
    """Rows for a table: each probe sentence, its top answers at `step` and at the last snapshot
    (one column when `step` is the last), each with its probability as `share` writes it (the
    pages pass bertlab.figures.answers.percent, so the numbers read as on the Fill mask page)."""
    now, last = history.at(step), history.snapshots[-1]
    rows = []
    for i, sentence in enumerate(history.probes.fill_mask):

        def fmt(c: Sequence[tuple[str, float]]) -> str:
            return ", ".join(f"{w} ({share(p)})" for w, p in c[:5])

        row = {"sentence": sentence, f"step {now.step:,}": fmt(now.fill_mask[i]) if i < len(now.fill_mask) else ""}
        if now.step != last.step:
            row[f"final (step {last.step:,})"] = fmt(last.fill_mask[i]) if i < len(last.fill_mask) else ""
        rows.append(row)
    return rows


def piece_answers(history: LearningHistory, step: int) -> list[str]:
    """The 'word + ##piece' answers (a piece the model proposed to continue the word before the
    [MASK]) that `fill_mask_table(history, step, ...)` shows: those at `step`, then those at the
    last snapshot, without repeats."""
    snaps = [history.at(step), history.snapshots[-1]]
    shown = (w for s in snaps for answers in s.fill_mask for w, _ in answers[:5])
    return list(dict.fromkeys(w for w in shown if " + ##" in w))
