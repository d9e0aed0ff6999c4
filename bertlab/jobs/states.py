"""What a run's state means to the person watching it: the messages to show (`state_messages`), what can
be done with it now (cancel, resume, try, delete), where a finished study's result is shown, and how a run
is named in a picker or a heading; so that the Jobs page draws messages instead of testing state names.

Imports bertlab.jobs.runs (the `Job`) and bertlab.storage.runfolder (the state names, a run's config and
result link); never plotly or streamlit.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertlab.jobs.runs import Job
from bertlab.storage.runfolder import ACTIVE_STATES, read_run_config, result_link

# Streamlit's bundled Material icons: they draw without an emoji font (headless browsers often lack one).
STATE_ICONS = {
    "queued": ":material/schedule:",
    "preparing": ":material/settings:",
    "running": ":material/directions_run:",
    "finished": ":material/check_circle:",
    "failed": ":material/error:",
    "cancelled": ":material/stop_circle:",
}


WAITING_STATES = ("queued", *ACTIVE_STATES)  # not ended yet: the page refreshes itself while one is


@dataclass(frozen=True)
class StateMessage:
    """One message about a run's state; the page draws it with st.error / st.warning / st.info."""

    level: str  # "error", "warning" or "info"
    text: str  # markdown
    icon: str | None = None  # Streamlit's bundled Material icon, or None for the level's own


def state_messages(job: Job) -> list[StateMessage]:
    """What to tell the user about a run's state, in the order to show it: a record that cannot be
    fully read (any state but failed), then what its state means and what Resume would do."""
    out = []
    if job.state != "failed" and job.error:  # shown despite a file it cannot read: say which and why
        out.append(
            StateMessage("warning", f"Part of this run's record cannot be read: {job.error}", ":material/warning:")
        )
    if job.state == "failed":
        error = (job.error or "no error recorded").strip()
        # a log's tail keeps its lines in a code block; a one-line message (bertlab's own errors, which
        # say what to change) reads as text, wrapped, instead of running off the side of a code block
        text = f"This run failed.\n\n```\n{error}\n```" if "\n" in error else f"This run failed: {error}"
        out.append(StateMessage("error", text, ":material/error:"))
    elif job.state == "cancelled" and job.alive:
        out.append(StateMessage("info", "Stopping: saving a checkpoint and exiting…"))
    elif job.state == "cancelled":
        resume = (
            f"Resume continues from its last checkpoint (step {job.status.get('checkpoint_step', '?')})."
            if job.has_checkpoint
            else "No checkpoint was saved; Resume starts it again."
        )
        out.append(StateMessage("info", "Cancelled. " + resume))
    elif job.state == "queued":
        out.append(StateMessage("info", "Waiting for a free device; it starts when the job ahead of it ends."))
    elif job.state == "preparing":
        out.append(StateMessage("info", "Preparing: reading the data and building the model…"))
    return out


def is_waiting(job: Job) -> bool:
    """Queued or active, or cancelled but still saving: the page keeps refreshing while one is."""
    return job.state in WAITING_STATES or job.alive


def progress_fraction(job: Job) -> float | None:
    """The progress bar's value (0-1) while the run is active and says how far it is; else None."""
    if job.state not in ACTIVE_STATES or job.progress is None:
        return None
    return min(1.0, max(0.0, float(job.progress)))


def expects_metrics(job: Job) -> bool:
    """False while queued or preparing (no metrics yet is no news then), and for an interpret study,
    which writes none: its result is saved beside its model."""
    return job.kind != "interpret" and job.state not in ("queued", "preparing")


def uses_gpu_now(job: Job) -> bool:
    """True while an active run trains on a GPU (worth showing the GPUs' load)."""
    return (job.device or "").startswith("cuda") and job.state in ACTIVE_STATES


def can_cancel(job: Job) -> bool:
    """Only a registry job that has not ended can be cancelled."""
    return job.managed and job.state in WAITING_STATES


def interrupted_text(jobs: list[Job], shown: int = 5) -> str:
    """What the Jobs page says of runs whose process went away mid-run (`Job.interrupted`)."""
    many = len(jobs) > 1
    names = ", ".join(j.id for j in jobs[:shown]) + ("…" if len(jobs) > shown else "")
    return (
        f"{len(jobs)} run{'s' if many else ''} stopped mid-run because {'their processes' if many else 'its process'} "
        f"went away (a restart, a closed laptop, a kill): {names}. Resumed, each continues from its last "
        "checkpoint, or from the start if it had none (`bertlab jobs resume --interrupted` does the same)."
    )


def can_resume(job: Job) -> bool:
    """A cancelled or failed run whose processes are gone can be queued again."""
    return not job.alive and job.state in ("cancelled", "failed")


def log_expanded(job: Job) -> bool:
    """The log opens by itself when the run failed: its last lines say why."""
    return job.state == "failed"


def can_try(job: Job) -> bool:
    """A finished run whose model is written can be tried on the page."""
    return job.state == "finished" and job.has_model


# The page that shows an interpret study's result (read from beside its model), by study.
RESULT_PAGES = {"probe": "What each layer knows", "heads": "Which heads matter"}
RESULT_LINKS = {"probe": {"tab": "probing"}}  # the page's query parameters that open where the result is


def result_link_params(job: Job) -> dict[str, str]:
    """The query parameters of the link to a finished study's result page ({} where the page opens on it)."""
    return dict(RESULT_LINKS.get((read_run_config(job.run_dir) or {}).get("study"), {}))


def result_page(job: Job) -> str | None:
    """The title of the page that shows a finished interpret study's result (saved beside its
    model, linked from the run folder); None for any other run."""
    if job.kind != "interpret" or job.state != "finished" or result_link(job.run_dir) is None:
        return None
    return RESULT_PAGES.get((read_run_config(job.run_dir) or {}).get("study"))


def can_delete(job: Job) -> bool:
    """Not while a process of it lives or it is active (a queued run can go)."""
    return not job.alive and job.state not in ACTIVE_STATES


def job_label(job: Job) -> str:
    """'bertlab-tiny-2026... (pretrain)': no state, since a picker label is not redrawn while the job moves on."""
    return f"{job.id} ({job.kind or '?'})"


def job_heading(job: Job) -> str:
    """Markdown heading text with the state's icon (Streamlit renders :material/...: in markdown)."""
    return f"{STATE_ICONS.get(job.state, '')} {job.id} — {job.kind or '?'}, {job.state}"
