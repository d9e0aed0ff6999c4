"""What an ablation suite runs: `SuiteSpec` (which table, on what, at what scale) and its `plan`.

Owns: the suite settings (`SuiteSpec`, `suggested_spec`, the `bertlab ablate run` line that gives
them: `command`, and the parsers of its text settings, `parse_grid`, `parse_overrides`, `parse_task_recipes`
and `parse_task_feature_lrs`, with their inverses), the base recipe every variant is pretrained with
(BASE_RECIPE at the steadier peak learning rate of SUITE_RECIPE, BASE_VOCAB) and the arguments of each job: one
pretraining job per variant (`pretrain_args`), one fine-tuning job per variant x task column x seed
(`finetune_args`), in `plan`. Rows and columns come from the table's `TableSpec`
(bertlab.ablations.tables).

Torch-free; submits nothing (bertlab.ablations.suites launches a plan).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from bertlab.ablations.tables import FEATURE_LR, TABLES, Column, TableSpec, Variant
from bertlab.config import PRESETS
from bertlab.errors import BertLabError, InputError
from bertlab.jobs.spec import DEFAULT_TASK_DATA, FINETUNE_TASKS, JobSpec, default_task_data, in_folder
from bertlab.storage.runfolder import REPO_ROOT
from bertlab.training.pretrain_config import load_config_file

BASE_RECIPE = "configs/default-model.yaml"
BASE_VOCAB = "checkpoints/bertlab-mini/vocab.txt"
# The base recipe's one change for the suites: a peak learning rate of 1e-3 instead of 1.5e-3. At
# 1.5e-3 (a step from the 2e-3 that the recipe study saw collapse) short runs fell into the unigram
# guess for good -- three Table 8 mixes never left 5% (their mix may share the blame), and a 600-s
# time-to-quality run sat at 5.0% from step 20 to 500 -- since a budget's 5% warm-up is only tens of
# steps there; at 1e-3 every run of the recipe study (warm-ups of ~20 steps) left it, and so did the
# time-to-quality run. A suite's own `--set train.learning_rate=...` wins. Longer runs
# (bench/results/plateau): with NSP neither 1e-3 nor 1.5e-3 nor a restart took a mini model past ~15%
# held-out accuracy within 14-19M tokens (1.5e-3 held, wsd, collapsed at 11M), while No NSP left the
# plateau by 7M; the suites' budget, not the rate, is what an MLM + NSP row needs more of.
SUITE_RECIPE = ("train.learning_rate=1e-3",)


@dataclass(frozen=True)
class SuiteSpec:
    """A suite before it runs: which table, on what, at what scale."""

    table: str  # table5 | table6 | table7 | table8
    tasks: tuple[str, ...] = ()  # () = the table's default_tasks
    seeds: int = 3  # fine-tuning restarts per variant and task (mean +- std)
    size: str = "tiny"  # model preset of every pretrained variant (Table 6: the grid instead)
    budget_s: float = 600.0  # wall-clock pretraining seconds per variant (when budget_tokens is 0)
    budget_tokens: int = 0  # pretraining input tokens per variant: equal tokens, so speed decides nothing
    grid: tuple[tuple[int, int, int], ...] = ()  # Table 6: (layers, hidden, heads); () = DEFAULT_GRID
    model: str = ""  # Table 7: the pretrained model to probe ("" = the shipped model)
    data: str = ""  # folder holding glue/, ud_en_ewt/, wnut17/, squad/ ("" = this workspace's ../shared/data)
    corpus: str = ""  # pretraining corpus ("" = the base recipe's)
    max_train_examples: int = 2000  # per fine-tuning run (0 = all)
    max_eval_examples: int = 1000
    epochs: float = 2.0
    finetune_lr: float = 1e-4  # fine-tuning mode
    feature_lr: float = FEATURE_LR  # the frozen-feature taggers' (feature mode; a task recipe does not change it)
    # (task, epochs, learning rate) for a task whose fine-tuning runs need their own recipe, as the paper
    # chose one per task: e.g. ("mrpc", 4.0, 3e-4), since MRPC's 3,668 pairs give a small model only 230
    # steps at 2 epochs and 1e-4, which left Table 5's mini models near the majority guess. Fine-tuning
    # mode only (feature mode: feature_lr); a recipe for a task the suite does not run changes nothing.
    task_recipes: tuple[tuple[str, float, float], ...] = ()
    # (task, learning rate) for a task whose frozen-feature taggers need their own rate, else feature_lr
    # (Table 7 on the shipped model runs both tasks' at 1e-2; the field is for a task that needs another)
    task_feature_lrs: tuple[tuple[str, float], ...] = ()
    threads: int = 0  # CPU threads per job (0 = torch's default)
    device: str = "auto"
    name: str = ""
    overrides: tuple[str, ...] = ()  # extra `bertlab pretrain` overrides for every variant (KEY=VALUE), last
    # (variant, job id): a pretraining job already submitted (running, finished or resumable) that the suite
    # uses for that variant instead of pretraining it again; launch checks it pretrains the same recipe
    reuse: tuple[tuple[str, str], ...] = ()
    # (variant, model folder): each row's own pretrained model, for a table whose rows are given models
    # (TableSpec.row_models: the successors suite's runs); rows without one are left out of the suite
    row_models: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.table not in TABLES:
            raise InputError(f"unknown table {self.table!r}; choose one of {', '.join(TABLES)}")
        for t in self.tasks:
            if t not in FINETUNE_TASKS:
                raise InputError(f"unknown task {t!r}; choose from {', '.join(FINETUNE_TASKS)}")
        if not 1 <= self.seeds <= 20:
            raise InputError(f"seeds must be between 1 and 20, not {self.seeds}")
        if self.size not in PRESETS:
            raise InputError(f"unknown size {self.size!r}; choose one of {', '.join(PRESETS)}")
        if not (self.finetune_lr > 0 and self.feature_lr > 0):
            raise InputError(f"learning rates must be above 0, not {self.finetune_lr:g} / {self.feature_lr:g}")
        if self.budget_tokens < 0:
            raise InputError(f"the token budget must be 0 (use budget_s) or more, not {self.budget_tokens}")
        if self.table_spec.pretrains and not (self.budget_s > 0 or self.budget_tokens > 0):
            raise InputError("give a pretraining budget: tokens per variant, or seconds (more than 0)")
        for layers, hidden, heads in self.grid:
            if min(layers, hidden, heads) < 1 or hidden % heads:
                raise InputError(f"grid entry L={layers} H={hidden} A={heads}: the width must divide by the heads")
        _check_per_task("recipe", [task for task, _epochs, _lr in self.task_recipes])
        for task, epochs, lr in self.task_recipes:
            if not (epochs > 0 and lr > 0):
                raise InputError(f"{task}'s recipe needs epochs and a learning rate above 0, not {epochs:g}/{lr:g}")
        _check_per_task("taggers' rate", [task for task, _lr in self.task_feature_lrs])
        for task, lr in self.task_feature_lrs:
            if not lr > 0:
                raise InputError(f"{task}'s taggers' learning rate must be above 0, not {lr:g}")
        pretrained = [v.key for v in self.table_spec.variants(self.grid) if v.pretrain is not None and not v.shares]
        rows = [variant for variant, _job in self.reuse]
        if len(set(rows)) < len(rows):
            raise InputError(
                f"reuse names one job per row; {', '.join(sorted({r for r in rows if rows.count(r) > 1}))} has more"
            )
        self._check_row_models()
        for variant, _job in self.reuse:
            if variant not in pretrained:
                raise InputError(
                    f"cannot reuse a pretraining job for {variant!r}: {self.table}'s pretrained rows are "
                    + (", ".join(pretrained) or "none")
                )

    def _check_row_models(self) -> None:
        """Row models name rows of a table whose rows are given models, each once."""
        rows = [variant for variant, _folder in self.row_models]
        if rows and not self.table_spec.row_models:
            raise InputError(f"{self.table}'s rows do not take models of their own (--row-model is for successors)")
        known = [v.key for v in self.table_spec.variants(self.grid)]
        for variant in rows:
            if variant not in known:
                raise InputError(f"no row {variant!r} in {self.table}; its rows are {', '.join(known)}")
        if len(set(rows)) < len(rows):
            raise InputError("give each row one model (--row-model VARIANT=FOLDER)")

    @property
    def table_spec(self) -> TableSpec:
        return TABLES[self.table]

    @property
    def task_list(self) -> tuple[str, ...]:
        return self.tasks or self.table_spec.default_tasks

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SuiteSpec:
        known = {f for f in cls.__dataclass_fields__}
        data = {k: v for k, v in data.items() if k in known}
        data["tasks"] = tuple(data.get("tasks") or ())
        data["grid"] = tuple(tuple(g) for g in data.get("grid") or ())
        data["overrides"] = tuple(data.get("overrides") or ())
        data["reuse"] = tuple(tuple(r) for r in data.get("reuse") or ())
        data["row_models"] = tuple(tuple(r) for r in data.get("row_models") or ())
        data["task_recipes"] = tuple((str(t), float(e), float(lr)) for t, e, lr in data.get("task_recipes") or ())
        data["task_feature_lrs"] = tuple((str(t), float(lr)) for t, lr in data.get("task_feature_lrs") or ())
        return cls(**data)

    def device_kind(self, gpus: int) -> str:
        """cpu or cuda: where the suite's jobs run on a machine with `gpus` GPUs (as the queue resolves "auto")."""
        return "cuda" if self.device == "cuda" or (self.device == "auto" and gpus > 0) else "cpu"

    def task_recipe(self, task: str) -> tuple[float, float]:
        """(epochs, learning rate) of `task`'s fine-tuning-mode runs: its own recipe, else the suite's."""
        own = {t: (epochs, lr) for t, epochs, lr in self.task_recipes}
        return own.get(task, (self.epochs, self.finetune_lr))

    def feature_rate(self, task: str) -> float:
        """The learning rate of `task`'s frozen-feature taggers: its own, else the suite's feature_lr."""
        return dict(self.task_feature_lrs).get(task, self.feature_lr)

    def reused(self, variant: str) -> str | None:
        """The id of the job `reuse` names for `variant`, if any."""
        return dict(self.reuse).get(variant)


def _check_per_task(what: str, tasks: list[str]) -> None:
    """A per-task setting (a task's own recipe, its taggers' rate) names known tasks, each once."""
    for task in tasks:
        if task not in FINETUNE_TASKS:
            raise InputError(f"a {what} for an unknown task {task!r}; choose from {', '.join(FINETUNE_TASKS)}")
    if len(set(tasks)) < len(tasks):
        raise InputError(f"give each task one {what}")


DEFAULT_BUDGET_TOKENS = 40_000_000  # pretraining tokens per variant the page offers: a mini model leaves the plateau
# the pretraining text of every committed set, the shipped model's (configs/default-model.yaml's header): gensim's
# Wikipedia sample, the public-domain books and WikiText-2 in this workspace's ../shared/data
SUGGESTED_CORPUS = "default,../shared/data/corpus/gutenberg,../shared/data/corpus/wikitext-2-raw"


def suggested_spec(table: str) -> SuiteSpec:
    """The suite the page suggests for a table, the recipe of its committed set: its task columns; a
    pretrained table at equal tokens (the table's own suggested budget and pretraining settings, else
    DEFAULT_BUDGET_TOKENS; mini models, or the committed shapes; SUGGESTED_CORPUS), its fine-tuning data,
    epochs, seeds and task recipes, one thread per job as on a small shared machine; Table 7 on the shipped
    model."""
    ts = TABLES[table]
    finetuning = {
        "tasks": ts.suggested_tasks,
        "seeds": ts.suggested_seeds,
        "max_train_examples": ts.suggested_examples[0],
        "max_eval_examples": ts.suggested_examples[1],
        "epochs": ts.suggested_epochs,
        "feature_lr": ts.suggested_feature_lr,
        "task_recipes": ts.task_recipes,
        "task_feature_lrs": ts.task_feature_lrs,
        "threads": 1,
    }
    if not ts.pretrains:
        return SuiteSpec(table, **finetuning)
    return SuiteSpec(
        table,
        size="mini",
        budget_tokens=ts.suggested_budget_tokens or DEFAULT_BUDGET_TOKENS,
        grid=ts.suggested_grid,
        corpus=SUGGESTED_CORPUS,
        overrides=ts.suggested_overrides,
        **finetuning,
    )


def command(spec: SuiteSpec) -> str:
    """The `bertlab ablate run` line that launches `spec` from a terminal (settings left at their
    defaults are left out)."""
    default = SuiteSpec(spec.table)
    args = ["bertlab ablate run", spec.table]
    if spec.tasks:
        args += ["--tasks", ",".join(spec.tasks)]
    if spec.table_spec.pretrains:
        args += ["--size", spec.size]  # a shape grid's too: its record keeps it, and `ablate pool` compares it
        args += ["--budget-tokens", f"{spec.budget_tokens / 1e6:g}M"] if spec.budget_tokens else []
        args += ["--budget-s", f"{spec.budget_s:g}"] if not spec.budget_tokens else []
    if spec.grid:
        args += ["--grid", ",".join(f"{a}/{b}/{c}" for a, b, c in spec.grid)]
    if spec.model:
        args += ["--model", spec.model]
    for name, flag in (
        ("seeds", "--seeds"),
        ("max_train_examples", "--max-train-examples"),
        ("max_eval_examples", "--max-eval-examples"),
        ("epochs", "--epochs"),
        ("finetune_lr", "--lr"),
        ("feature_lr", "--feature-lr"),
        ("threads", "--threads"),
        ("data", "--data"),
        ("corpus", "--corpus"),
    ):
        if getattr(spec, name) != getattr(default, name):
            args += [
                flag,
                f"{getattr(spec, name):g}" if isinstance(getattr(spec, name), float) else str(getattr(spec, name)),
            ]
    args += [f"--task-recipe {task_recipes_text((r,))}" for r in spec.task_recipes]
    args += [f"--task-feature-lr {task_feature_lrs_text((r,))}" for r in spec.task_feature_lrs]
    args += [f"--set {o}" for o in spec.overrides]
    args += [f"--reuse {v}={job}" for v, job in spec.reuse]
    args += [f"--row-model {v}={folder}" for v, folder in spec.row_models]
    return " ".join(args)


# Settings that change how a run goes or how often it is measured, not what it learns: left out of a
# suite's recipe changes (and of what reuse compares), so a suite that checkpoints less often or stays
# eager still has the base recipe.
RUN_SETTINGS = frozenset(
    (
        "train.save_every",
        "train.save_every_s",
        "train.log_every",
        "train.eval_every",
        "train.compile",
        "train.num_threads",
        "train.snapshots",
        "train.device",
    )
)


def sequence_switch(spec: SuiteSpec) -> tuple[float, int, int, int] | None:
    """(share of the budget, length before, length after, the held-out evaluation's length) where every
    variant's pretraining moves on to longer sequences (the paper's two phases; the base recipe's
    `phase2`), None without a switch."""
    try:
        with in_folder(REPO_ROOT):  # the base recipe's paths are the repository's
            cfg = load_config_file(BASE_RECIPE, recipe_changes(spec))
            first, *second = cfg.phase_data()
            at, heldout = (cfg.phase2_at if second else 0.0), cfg.heldout_data().max_seq_length
    except (BertLabError, ValueError, TypeError):
        return None
    if not second or second[0].max_seq_length <= first.max_seq_length:
        return None
    return at, first.max_seq_length, second[0].max_seq_length, heldout


def recipe_changes(spec: SuiteSpec) -> list[str]:
    """What every variant's pretraining changes in the base recipe: SUITE_RECIPE, then the suite's own
    overrides, the last of each key, less any that restates the base recipe's value (KEY=VALUE) or only
    changes how the run goes (RUN_SETTINGS)."""
    last = {o.split("=", 1)[0].strip(): o for o in (*SUITE_RECIPE, *spec.overrides)}
    last = {k: o for k, o in last.items() if k not in RUN_SETTINGS}
    try:
        with in_folder(REPO_ROOT):  # the base recipe's paths are the repository's
            base = flatten(asdict(load_config_file(BASE_RECIPE)))
            ours = flatten(asdict(load_config_file(BASE_RECIPE, list(last.values()))))
    except (BertLabError, ValueError, TypeError):
        return list(last.values())  # the jobs will say what is wrong; here, list every change as given

    def restates(key: str) -> bool:
        under = [k for k in base.keys() | ours.keys() if k == key or k.startswith(key + ".")]
        return bool(under) and all(base.get(k) == ours.get(k) for k in under)

    return [o for key, o in last.items() if not restates(key)]


def flatten(d: dict, prefix: str = "") -> dict:
    """{'train': {'learning_rate': 1e-3}} -> {'train.learning_rate': 1e-3}, so a difference names its field."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def parse_task_recipe(text: str) -> tuple[str, float, float]:
    """'mrpc=4/3e-4' -> ('mrpc', 4.0, 3e-4): a task's own fine-tuning epochs and learning rate."""
    task, sep, rest = text.partition("=")
    epochs, sep2, lr = rest.partition("/")
    try:
        if not (sep and sep2 and task.strip()):
            raise ValueError
        return task.strip(), float(epochs), float(lr)
    except ValueError:
        raise InputError(f"a task recipe is TASK=EPOCHS/LR, e.g. mrpc=4/3e-4, not {text!r}") from None


def parse_task_recipes(text: str) -> tuple[tuple[str, float, float], ...]:
    """'mrpc=4/3e-4, rte=4/3e-4' -> every task's recipe ('' -> none)."""
    return tuple(parse_task_recipe(part) for part in text.split(",") if part.strip())


def task_recipes_text(recipes: tuple[tuple[str, float, float], ...]) -> str:
    """(('mrpc', 4.0, 3e-4),) -> 'mrpc=4/0.0003', as `parse_task_recipes` reads it back."""
    return ", ".join(f"{task}={epochs:g}/{lr:g}" for task, epochs, lr in recipes)


def parse_task_feature_lrs(text: str) -> tuple[tuple[str, float], ...]:
    """'upos=1e-2, ner=3e-3' -> each task's frozen-feature taggers' rate ('' -> none)."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        task, sep, lr = part.partition("=")
        try:
            if not (sep and task.strip()):
                raise ValueError
            out.append((task.strip(), float(lr)))
        except ValueError:
            raise InputError(f"a task's taggers' rate is TASK=LR, e.g. upos=1e-2, not {part!r}") from None
    return tuple(out)


def task_feature_lrs_text(rates: tuple[tuple[str, float], ...]) -> str:
    """(('upos', 0.01),) -> 'upos=0.01', as `parse_task_feature_lrs` reads it back."""
    return ", ".join(f"{task}={lr:g}" for task, lr in rates)


def parse_overrides(text: str) -> tuple[str, ...]:
    """'train.batch_size=128' lines -> the suite's pretraining overrides (KEY=VALUE, one per line, as
    `--set` takes them; blank lines skipped). Whether a key exists and its value fits is checked where the
    suite's jobs are resolved (its estimate), with the same messages as `bertlab pretrain`'s."""
    out = []
    for line in text.splitlines():
        entry = line.strip()
        if not entry:
            continue
        key, eq, value = entry.partition("=")
        if not eq or not key.strip() or not value.strip() or " " in key.strip():
            raise InputError(f"pretraining setting {entry!r}: write one KEY=VALUE per line, e.g. train.batch_size=128")
        out.append(f"{key.strip()}={value.strip()}")
    return tuple(out)


def parse_grid(text: str) -> tuple[tuple[int, int, int], ...]:
    """'2/128/2, 4/256/4' -> ((2, 128, 2), (4, 256, 4))."""
    out = []
    for part in text.replace(";", ",").split(","):
        if not part.strip():
            continue
        bits = part.strip().lower().replace("l", "").replace("h", "").replace("a", "").replace("-", "/").split("/")
        try:
            layers, hidden, heads = (int(b) for b in bits)
        except ValueError:
            raise InputError(f"grid entry {part.strip()!r}: write layers/hidden/heads, e.g. 4/256/4") from None
        out.append((layers, hidden, heads))
    if not out:
        raise InputError("the grid is empty; write layers/hidden/heads entries, e.g. 2/128/2, 4/256/4")
    return tuple(out)


def variants(spec: SuiteSpec) -> tuple[Variant, ...]:
    """The rows of the suite's table, in the paper's order."""
    return spec.table_spec.variants(spec.grid)


def columns(spec: SuiteSpec) -> tuple[Column, ...]:
    """The task columns (a table with feature columns trains each task both ways)."""
    return spec.table_spec.columns(spec.task_list)


@dataclass(frozen=True)
class PlannedRun:
    """One job of a suite, before it is submitted."""

    variant: str
    column: str  # "pretraining" for a pretraining job
    seed: int
    spec: JobSpec
    needs: str | None = None  # the variant whose pretraining job this one waits for


def task_args(spec: SuiteSpec, task: str) -> list[str]:
    path = str(Path(spec.data).expanduser() / DEFAULT_TASK_DATA[task]) if spec.data else default_task_data(task)
    args = ["--task", task, "--data", path]
    if task in ("qnli", "squad"):  # no train set here: train on 80% of the dev set (see DATA_NOTES)
        args += ["--split-dev", "0.8"]
    return args


def _prefix(spec: SuiteSpec) -> str:
    return spec.name or spec.table


def pretrain_args(spec: SuiteSpec, variant: Variant, suite_id: str) -> tuple[str, ...]:
    args = [
        "--config",
        BASE_RECIPE,
        f"name={_prefix(spec)}-{variant.key}",
        f"size={spec.size}",
        f"train.max_time_s={0.0 if spec.budget_tokens else float(spec.budget_s)}",
        "train.max_steps=0",
        f"train.max_tokens={int(spec.budget_tokens)}",
        "train.snapshots=false",
        f"vocab={BASE_VOCAB}",
        *SUITE_RECIPE,
    ]
    if spec.threads:
        args.append(f"train.num_threads={spec.threads}")
    if spec.corpus:
        parts = [c.strip() for c in spec.corpus.split(",") if c.strip()]
        args.append("corpus=[" + ", ".join(parts) + "]")
    return tuple(args) + tuple(variant.pretrain or ()) + tuple(spec.overrides)


def finetune_args(spec: SuiteSpec, variant: Variant, column: Column, seed: int, model: str) -> tuple[str, ...]:
    extra = [*column.finetune, *variant.finetune]
    feature = "feature" in extra
    epochs, lr = (spec.epochs, spec.feature_rate(column.task)) if feature else spec.task_recipe(column.task)
    args = [*task_args(spec, column.task), "--model", model, "--seed", str(seed), "--lr", str(lr)]
    if epochs:
        args += ["--epochs", str(epochs)]
    if spec.max_train_examples:
        args += ["--max-train-examples", str(spec.max_train_examples)]
    if spec.max_eval_examples:
        args += ["--max-eval-examples", str(spec.max_eval_examples)]
    if spec.threads:
        args += ["--threads", str(spec.threads)]
    # later flags win in argparse: the variant's feature choice overrides a column's default
    return tuple(args + extra)


def plan(spec: SuiteSpec, suite_id: str) -> list[PlannedRun]:
    """Every job of the suite: pretraining first, then fine-tuning (model paths are filled in at launch)."""
    runs: list[PlannedRun] = []
    own = dict(spec.row_models)
    # a table whose rows are given models runs only the rows that have one
    vs = tuple(v for v in variants(spec) if v.key in own or not spec.table_spec.row_models)
    for v in vs:
        if v.pretrain is not None and v.shares is None:
            runs.append(
                PlannedRun(
                    v.key,
                    "pretraining",
                    0,
                    JobSpec("pretrain", pretrain_args(spec, v, suite_id), spec.device, name=f"{_prefix(spec)}-{v.key}"),
                )
            )
    for v in vs:
        source = v.shares or (v.key if v.pretrain is not None else None)
        for col in columns(spec):
            for seed in range(spec.seeds):
                model = (
                    "{model}"
                    if source
                    else (own.get(v.key) or spec.model or str(REPO_ROOT / "checkpoints" / "bertlab-mini"))
                )
                runs.append(
                    PlannedRun(
                        v.key,
                        col.key,
                        seed,
                        JobSpec(
                            "finetune",
                            finetune_args(spec, v, col, seed, model),
                            spec.device,
                            name=f"{_prefix(spec)}-{v.key}-{col.key}-s{seed}",
                        ),
                        needs=source,
                    )
                )
    return runs
