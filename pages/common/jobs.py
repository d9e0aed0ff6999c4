"""A page's "Run it as a job" button: work too long to wait for (a probe, a head study) queued as a
job, with the admin token's rule on a shared app. The jobs themselves are bertlab.jobs'."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from bertlab.app_pages import page_titled
from bertlab.errors import BertLabError
from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import JobSpec, check_path_allowed
from bertlab.storage.runfolder import REPO_ROOT
from pages.common.admin import current_access


def jobs_allowed() -> bool:
    """True when this session may queue jobs; else says why in a caption (a shared app without the token)."""
    access = current_access()
    if not access.allowed:
        st.caption(f":material/lock: Running it as a job needs the admin token (on the Jobs page). {access.reason}")
    return access.allowed


def run_as_job_button(key: str, spec: Callable[[], JobSpec], paths: Sequence[str] = ()) -> None:
    """The button: on a shared app the typed `paths` must lie under the data folders; a refused or
    invalid job is a message, a queued one a link to the Jobs page."""
    if not st.button("Run it as a job", key=key, icon=":material/rocket_launch:"):
        return
    try:
        if current_access().shared:
            for path in paths:
                check_path_allowed(path, cwd=REPO_ROOT)
        job = JobRegistry().submit(spec(), cwd=REPO_ROOT)
    except BertLabError as exc:
        st.error(str(exc), icon=":material/front_hand:")
    else:
        st.session_state["jobs_focus"] = job.id
        st.success(f"Job **{job.id}** is {job.state}; this page shows its result when it has finished.")
        st.page_link(page_titled("Jobs").file, label="Watch it on the Jobs page", icon=page_titled("Jobs").icon)
