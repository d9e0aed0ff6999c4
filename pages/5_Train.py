"""Train: launch pretraining or fine-tuning as a background job, with an estimate of time and memory first."""

from __future__ import annotations

import shlex

import pandas as pd
import streamlit as st

from bertlab.app_pages import page_titled
from bertlab.config import PRESETS
from bertlab.data.corpus import NAMED_SOURCES
from bertlab.errors import BertLabError
from bertlab.finetune.args import FEATURE_CHOICES, MAX_EPOCHS
from bertlab.finetune.tasks import get_task, suggested_learning_rate
from bertlab.formatting import format_duration
from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import (
    FINETUNE_TASKS,
    JobSpec,
    check_path_allowed,
    default_task_data,
    finetune_args,
    pretrain_args,
)
from bertlab.jobs.view import estimate_caption, estimate_rows, format_count, format_gb, jobs_table
from bertlab.models.registry import family_for
from bertlab.storage.catalog import find_checkpoints
from bertlab.storage.model_card import pretrained_length, read_card
from bertlab.storage.modelfolder import hidden_width
from bertlab.storage.runfolder import REPO_ROOT
from pages.common import chosen_model, concept, setup_page
from pages.common.admin import job_access_field

PAGE = setup_page(__file__)
JOBS = page_titled("Jobs")
st.title(PAGE.heading)
access = job_access_field()  # loopback: open; shared: the admin token of whoever started the app

PRETRAIN, FINETUNE = "Pretrain a BERT", "Fine-tune on a task"
RANDOM = "__random__"
registry = JobRegistry()
# shared (not listening on loopback only): whoever reaches the app must not make a job read any server file
shared = access.shared
# the presets and recipes, then BERT's successors (each a family and an objective: configs/successors/)
configs = [
    p.relative_to(REPO_ROOT).as_posix()
    for pattern in ("*.yaml", "successors/*.yaml")
    for p in sorted((REPO_ROOT / "configs").glob(pattern))
]

if not access.allowed:
    # a shared app without the token: the runs, read-only; no form (its estimate times training steps)
    st.subheader("Runs so far")
    runs = registry.list(start_queued=False)
    if runs:
        st.dataframe(pd.DataFrame(jobs_table(runs)), hide_index=True, width="stretch")
    else:
        st.caption(f"No runs yet in `{registry.root}`.")
    st.page_link(JOBS.file, label="Their curves and logs on the Jobs page", icon=JOBS.icon)
    st.stop()


@st.cache_data(show_spinner=False)
def _config_defaults(path: str, mtime: float) -> dict:
    """The fields a config file sets, to seed the form (mtime: re-read when the file changes)."""
    from bertlab.training.pretrain_config import load_config_file

    cfg = load_config_file(REPO_ROOT / path)
    corpus = cfg.corpus[0] if len(cfg.corpus) == 1 else ", ".join(cfg.corpus)
    return {
        "size": cfg.size,
        "corpus": corpus,
        "lr": cfg.train.learning_rate,
        "batch": cfg.train.batch_size,
        "seq": cfg.data.max_seq_length,
        "steps": cfg.train.max_steps or 1000,
        "mask": cfg.data.masked_lm_prob,
        "minutes": max(1, int(cfg.train.max_time_s / 60)) if cfg.train.max_time_s else 10,
        "budget": "Minutes" if cfg.train.max_time_s and not cfg.train.max_steps else "Steps",
        "trains": f"{family_for({'model_type': cfg.model_type}).name} · {cfg.data.objective_spec.description}",
    }


form, side = st.columns([3, 2], gap="large")
with side:
    concept(
        "**Pretraining** learns BERT's weights from raw text with the masked LM and next sentence prediction "
        "(paper §3.1). **Fine-tuning** starts from pretrained weights and trains all of them, plus one small "
        "output layer, on a labelled task (§3.2, Figure 4). A job runs in the background: you can close this "
        "tab and watch it later on the **Jobs** page. One job runs per GPU (one at a time on a CPU); the rest wait in a queue."
    )
    if shared:
        st.caption(
            "This app is shared on the network, so corpus, data, model and config paths must lie in the "
            "data folders it was started with (BERTLAB_DATA_ROOTS; by default the project and ../shared/data)."
        )

with form:
    kind = st.segmented_control("What to train", [PRETRAIN, FINETUNE], default=PRETRAIN, key="train_kind") or PRETRAIN
    if kind == PRETRAIN:
        config = st.selectbox(
            "Start from config",
            configs,
            index=configs.index("configs/tiny.yaml") if "configs/tiny.yaml" in configs else 0,
            key="train_config",
            help="A YAML file in configs/; the fields below override it.",
        )
        d = _config_defaults(config, (REPO_ROOT / config).stat().st_mtime)
        st.caption(f"Trains: {d['trains']}")
        k = config.replace("/", "_")  # per-config widget keys: picking another config resets the fields to its values
        seq_key = f"train_seq_{k}"
        c1, c2 = st.columns(2)
        size = c1.selectbox(
            "Model size",
            list(PRESETS),
            index=list(PRESETS).index(d["size"]),
            key=f"train_size_{k}",
            help="tiny L=2/H=128 · mini L=4/H=256 · small L=4/H=512 · medium L=8/H=512 · base L=12/H=768 · large L=24/H=1024",
        )
        corpus = c2.text_input(
            "Corpus",
            value=d["corpus"],
            key=f"train_corpus_{k}",
            help="'default' (gensim's Wikipedia sample), a text file or folder, or several separated by commas.",
        )
    else:
        c1, c2 = st.columns(2)
        task = c1.selectbox(
            "Task",
            FINETUNE_TASKS,
            key="train_task",
            help="GLUE: sst2 cola mrpc rte qnli mnli stsb · tagging: upos ner · question answering: squad",
        )
        data = c2.text_input(
            "Data folder",
            value=default_task_data(task),
            key=f"train_data_{task}",
            help="The folder with the task's train/dev files (or one file).",
        )
        entries = [e for e in find_checkpoints() if e.exists]
        options = [e.path for e in entries]
        start = chosen_model()
        if start not in options:
            options = [start] + options
        options.append(RANDOM)
        labels = {e.path: e.label for e in entries} | {RANDOM: "No pretraining: random weights (the paper's baseline)"}
        c3, c4 = st.columns(2)
        model = c3.selectbox(
            "Starting checkpoint",
            options,
            format_func=lambda p: labels.get(p, p),
            key="train_model",
            help="The pretrained model to fine-tune: the shipped default, a checkpoint, or a finished run.",
        )
        mode = c4.radio(
            "Mode",
            ["finetune", "feature"],
            horizontal=True,
            key="train_mode",
            help="finetune: train every weight · feature: frozen encoder, train only the output layer (paper Table 7)",
        )
        with st.expander("Task layer and seed (the paper's Tables 5 and 7)"):
            f1, f2 = st.columns(2)
            feature_keys = list(FEATURE_CHOICES)
            features = f1.selectbox(
                "Encoder states fed to the task layer",
                feature_keys,
                index=feature_keys.index("cat4" if mode == "feature" else "last"),
                format_func=FEATURE_CHOICES.get,
                key=f"train_features_{mode}",
                help="Table 7 compares these on a frozen encoder; the paper fine-tunes on the last layer.",
            )
            # feature-based tagging always reads the states through a two-layer BiLSTM (the paper's set-up)
            always = mode == "feature" and get_task(task).shape == "tagging"
            bilstm = f2.checkbox(
                "BiLSTM before the output layer",
                value=always,
                disabled=always,
                key=f"train_bilstm_{always}",
                help="Table 5's '+ BiLSTM' row: a two-layer BiLSTM between the encoder and the output layer. "
                "Feature-based tagging always has one.",
            )
            head_lr = f1.number_input(
                "Learning rate of the added layers",
                min_value=1e-7,
                max_value=1.0,
                value=None,
                format="%.1e",
                step=1e-4,
                key="train_head_lr",
                placeholder="the learning rate below",
                disabled=mode == "feature",
                help="Empty: the learning rate below. A fresh BiLSTM on a fine-tuned encoder may need more than the "
                "encoder (e.g. 1e-2 for the layers, 5e-4 for the encoder). With a frozen encoder the learning "
                "rate below is the added layers' own.",
            )
            seed = f2.number_input(
                "Seed",
                min_value=0,
                max_value=2**31 - 1,
                value=0,
                key="train_seed",
                help="Of the output layer's init, the shuffling and dropout: rerun with other seeds to see the "
                "spread of a score.",
            )
        task_seq = get_task(task).max_seq_length  # SQuAD 384, as run_squad.py; 128 for the rest
        trained = pretrained_length(read_card(model)) if model != RANDOM else 0
        seq = min(task_seq, trained) if trained else task_seq  # positions past the pretraining were never trained
        width = PRESETS["tiny"].hidden_size if model == RANDOM else hidden_width(model)
        start_lr = suggested_learning_rate(width, mode)  # a mini model barely moves at the paper's 5e-5
        d = {"lr": start_lr, "batch": 32, "seq": seq, "steps": 300, "minutes": 10, "budget": "Steps"}
        # per-task widget keys, as per-config ones above: each task opens on its own defaults (and the
        # learning rate on the one suggested for this model and mode)
        k = f"ft_{task}"
        seq_key = f"train_seq_{k}" + (f"_{seq}" if seq < task_seq else "")  # and a shorter model on its length

    c1, c2 = st.columns(2)
    budgets = ["Steps", "Minutes"] if kind == PRETRAIN else ["Steps", "Epochs", "Minutes"]
    budget = c1.radio(
        "Budget",
        budgets,
        index=budgets.index(d["budget"]),
        horizontal=True,
        key=f"train_budget_{k}",
        help=None if kind == PRETRAIN else "Epochs: passes over the train set (the paper fine-tunes for 2-4).",
    )
    epochs = 0.0
    if budget == "Steps":
        steps = c2.number_input(
            "Optimizer steps", min_value=1, max_value=10_000_000, value=int(d["steps"]), step=50, key=f"train_steps_{k}"
        )
        minutes = 0
    elif budget == "Epochs":
        epochs = c2.number_input(
            "Epochs", min_value=0.1, max_value=float(MAX_EPOCHS), value=3.0, step=0.5, key=f"train_epochs_{k}"
        )
        steps = minutes = 0
    else:
        minutes = c2.number_input(
            "Minutes of training",
            min_value=1,
            max_value=100_000,
            value=int(d["minutes"]),
            step=5,
            key=f"train_minutes_{k}",
        )
        steps = 0
    c1, c2, c3 = st.columns(3)
    lr = c1.number_input(
        "Learning rate",
        min_value=1e-7,
        max_value=1.0,
        value=float(d["lr"]),
        format="%.1e",
        step=1e-5,
        key=f"train_lr_{k}" + (f"_{d['lr']:g}" if kind != PRETRAIN else ""),
        help=None
        if kind == PRETRAIN
        else f"Suggested for this model: {d['lr']:g} (small models fine-tune best near 3e-4, BERT-base at the "
        "paper's 5e-5 to 2e-5; a frozen encoder's task model at 1e-3).",
    )
    batch = c2.number_input(
        "Batch size", min_value=1, max_value=8192, value=int(d["batch"]), step=8, key=f"train_batch_{k}"
    )
    seq = c3.select_slider(
        "Max sequence length",
        [32, 64, 128, 256, 384, 512],
        value=int(d["seq"]) if int(d["seq"]) in (32, 64, 128, 256, 384, 512) else 128,
        key=seq_key,
    )
    if kind != PRETRAIN and trained and (seq > trained or seq == trained < task_seq):
        st.caption(
            f"Inputs are cut to {trained} tokens: this model was pretrained on sequences of at most {trained}, "
            "so the position vectors past them were never trained."
        )
    if kind == PRETRAIN:
        c1, c2 = st.columns(2)
        mask_share = c1.number_input(
            "Share of tokens masked",
            min_value=0.05,
            max_value=0.8,
            value=float(d["mask"]),
            step=0.05,
            format="%.2f",
            key=f"train_mask_{k}",
            help="The paper masks 15%; 20-40% gives more signal per step. The cap on predictions "
            "per sequence follows length x share.",
        )
        snapshots = c2.checkbox(
            "Keep snapshots to watch it learn",
            value=True,
            key=f"train_snap_{k}",
            help="Small fp16 copies of the model at log-spaced steps (10, 20, 30, 50, 70, 100, ...), "
            "shown on the Watch it learn page.",
        )
    c1, c2, c3 = st.columns(3)
    device = c1.selectbox(
        "Device", ["auto", "cuda", "cpu"], key="train_device", help="auto: a CUDA GPU when there is one, else the CPU"
    )
    gpus_here = registry.gpus
    num_gpus = c2.number_input(
        "GPUs",
        min_value=1,
        max_value=max(1, gpus_here),
        value=1,
        key="train_gpus",
        disabled=gpus_here < 2,
        help=f"This machine has {gpus_here} GPU(s). Several GPUs run the job under torchrun (one process each).",
    )
    name = c3.text_input("Run name (optional)", key="train_name", placeholder="folder name prefix")

# The spec the form describes, checked and estimated on every change.
problem = None
spec = est = None
try:
    if shared:
        typed = [config, *corpus.split(",")] if kind == PRETRAIN else [data, "" if model == RANDOM else model]
        for path in (p.strip() for p in typed):
            if path and path not in NAMED_SOURCES:
                check_path_allowed(path, cwd=REPO_ROOT)
    if kind == PRETRAIN:
        args = pretrain_args(
            config=config,
            size=size,
            corpus=corpus.strip(),
            max_steps=steps,
            max_time_s=minutes * 60,
            learning_rate=lr,
            batch_size=batch,
            max_seq_length=seq,
            masked_lm_prob=mask_share,
            snapshots=snapshots,
        )
    else:
        args = finetune_args(
            task,
            data.strip(),
            None if model == RANDOM else model,
            size="tiny" if model == RANDOM else None,
            mode=mode,
            max_steps=steps,
            max_time_s=minutes * 60,
            learning_rate=lr,
            batch_size=batch,
            max_seq_length=seq,
            epochs=epochs,
            features=features,
            bilstm=bilstm and not always,  # always there: no flag
            head_lr=head_lr if head_lr and mode == "finetune" else 0.0,
            seed=int(seed),
        )
    spec = JobSpec(
        "pretrain" if kind == PRETRAIN else "finetune", args, device=device, num_gpus=int(num_gpus), name=name.strip()
    )
    with st.spinner("Counting the task's tokens and timing a few training steps of this model…"):
        est = estimate_spec(spec, cwd=REPO_ROOT, runs_dir=registry.root)
except BertLabError as exc:
    problem = str(exc)
except Exception as exc:  # a config that breaks in an unexpected way: say so plainly, never a traceback
    problem = f"{type(exc).__name__}: {exc}"
if est is not None and est.problem:  # the job would fail on its data: shown with the estimate, not launched
    problem = est.problem[:1].upper() + est.problem[1:]

with form:
    st.subheader("Estimate")
    if est is not None:
        m1, m2, m3 = st.columns(3)
        m1.metric("Parameters", format_count(est.parameters))
        m2.metric(
            "Memory",
            format_gb(est.total_gb),
            help="per process: weights + gradients + AdamW states + activations + overhead",
        )
        m3.metric(
            "Time",
            format_duration(est.total_s) if est.total_s is not None else "?",
            help="training (and compiling, when the job compiles), not data preparation; from " + est.throughput_source,
        )
        st.caption(estimate_caption(est))
        for note in est.notes:  # clauses of the estimate's summary: each shown here as a sentence
            if note != est.problem:
                (st.warning if note in est.warnings else st.caption)(note[:1].upper() + note[1:])
    if problem is not None:
        st.error(problem, icon=":material/front_hand:")

with side:
    if est is not None:
        st.markdown("**Where the estimate comes from**")
        st.markdown("\n".join(f"- **{label}**: {value}" for label, value in estimate_rows(est)))

with form:
    twins = registry.same_jobs(spec, cwd=REPO_ROOT) if spec is not None and problem is None else []
    again = True
    if twins:  # a second click on Launch: the same seed on the same data, the same result
        st.warning(
            f"The same job is already {twins[0].state}: **{twins[0].id}**. A second copy would repeat it exactly "
            "(the same settings, data and seed); watch it on the Jobs page.",
            icon=":material/content_copy:",
        )
        # a fresh box after each launch: one confirmation queues one copy
        again = st.checkbox(
            "Launch a second copy anyway", key=f"train_again_{st.session_state.get('train_launched', 0)}"
        )
    if (
        st.button(
            "Launch",
            type="primary",
            disabled=problem is not None or not again,
            key="train_launch",
            icon=":material/rocket_launch:",
        )
        and again
    ):  # a click that reached a rerun where the twin is now queued launches nothing
        try:
            job = registry.submit(spec, cwd=REPO_ROOT)
        except BertLabError as exc:
            st.error(str(exc), icon=":material/front_hand:")
        else:
            st.session_state["jobs_focus"] = job.id
            st.session_state["train_launched"] = st.session_state.get("train_launched", 0) + 1
            st.success(f"Job **{job.id}** is {job.state}. Its folder: `{job.run_dir}`")
            st.page_link(JOBS.file, label="Watch it on the Jobs page", icon=JOBS.icon)
    if spec is not None:
        with st.expander("The same job from a terminal"):
            gpus_flag = f"--gpus {spec.num_gpus} " if spec.num_gpus > 1 else ""
            name_flag = f"--name {shlex.quote(spec.name)} " if spec.name else ""
            st.code(
                f"bertlab jobs submit {gpus_flag}{name_flag}--device {spec.device} {spec.kind} {shlex.join(spec.args)}",
                language="bash",
            )
