"""Who may manage jobs (bertlab/jobs/access.py), and the pages that ask: a shared app (server.address
0.0.0.0) refuses to launch, cancel or delete without the admin token and allows it with the token;
on loopback nothing changes. No background process starts: the queue's tick() is off (app_env).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_pages_jobs import JOBS, TRAIN, app_env, fake_run, open_page  # noqa: F401  (app_env: a fixture)

from bertlab.app_pages import page_titled
from bertlab.jobs.access import ADMIN_TOKEN_ENV, AdminToken, admin_token, is_shared, job_access, startup_message
from bertlab.jobs.registry import JobRegistry

TOKEN = "class-of-30-secret-token"
ABLATIONS = page_titled("Ablations").file
FIELD = "bertlab_admin_token_field"


# --------------------------------------------------------------------------------------
# The rule
# --------------------------------------------------------------------------------------
def test_loopback_needs_no_token():
    for address in ("127.0.0.1", "localhost", "::1"):
        access = job_access(address, expected=None, typed=None)
        assert access.allowed and not access.shared
    assert not is_shared("127.0.0.1") and is_shared("0.0.0.0") and is_shared("")  # "": every interface


def test_shared_app_refuses_without_the_token_and_says_why():
    refused = job_access("0.0.0.0", expected=TOKEN, typed="")
    assert not refused.allowed and refused.shared
    assert "admin token" in refused.reason and ADMIN_TOKEN_ENV in refused.reason
    assert "look at every run" in refused.reason  # what they still can do
    wrong = job_access("0.0.0.0", expected=TOKEN, typed=TOKEN[:-1])
    assert not wrong.allowed and "not the one this app was started with" in wrong.reason
    assert TOKEN not in refused.reason + wrong.reason
    assert job_access("0.0.0.0", expected=TOKEN, typed=f"  {TOKEN} ").allowed  # pasted with spaces
    assert not job_access("0.0.0.0", expected=None, typed="anything").allowed  # no token set: nobody
    assert not job_access("0.0.0.0", expected="", typed="").allowed


def test_admin_token_from_the_environment_or_made_once():
    chosen = admin_token({ADMIN_TOKEN_ENV: f" {TOKEN} "})
    assert chosen == AdminToken(TOKEN, generated=False)
    made = admin_token({ADMIN_TOKEN_ENV: "  "}, generate=lambda: "made-here")
    assert made == AdminToken("made-here", generated=True)
    a, b = admin_token({}), admin_token({})
    assert a.generated and len(a.value) >= 20 and a.value != b.value


def test_startup_message_prints_a_made_token_and_never_a_chosen_one():
    made = startup_message("0.0.0.0", AdminToken("made-here-123456", generated=True))
    assert "made-here-123456" in made and ADMIN_TOKEN_ENV in made
    chosen = startup_message("0.0.0.0", AdminToken(TOKEN, generated=False))
    assert TOKEN not in chosen and ADMIN_TOKEN_ENV in chosen and "Warning" not in chosen
    assert "Warning" in startup_message("0.0.0.0", AdminToken("abc", generated=False))


# --------------------------------------------------------------------------------------
# The pages
# --------------------------------------------------------------------------------------
@pytest.fixture
def shared(app_env, monkeypatch):  # noqa: F811
    """The app as if started with --server.address 0.0.0.0 and $BERTLAB_ADMIN_TOKEN set."""
    from streamlit import config

    from pages.common.admin import server_token

    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)
    server_token.clear()  # one token per server process: this "process" starts now
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    yield app_env
    config.set_option("server.address", before)
    server_token.clear()


def shown(at) -> str:
    return " ".join(e.value for kind in ("markdown", "caption", "info", "warning", "error") for e in at.get(kind))


def test_shared_train_page_without_the_token_lists_runs_read_only(shared):
    fake_run(shared, "done-run", "finished")
    at = open_page(TRAIN)
    assert "needs the admin token" in shown(at) and TOKEN not in shown(at)
    assert not [b for b in at.button if b.key == "train_launch"]  # no form, nothing to launch
    assert "done-run" in at.dataframe[0].value["run"].tolist()
    at.text_input(key=FIELD).input("a guess").run()
    assert "not the one this app was started with" in shown(at)
    assert not [b for b in at.button if b.key == "train_launch"]


def test_shared_train_page_with_the_token_launches(shared):
    pytest.importorskip("gensim")  # the Train page's default corpus is the sample in gensim's wheel
    at = open_page(TRAIN)
    at.text_input(key=FIELD).input(TOKEN).run()
    assert not at.exception
    assert "Admin token accepted" in shown(at)
    at.number_input(key="train_steps_configs_tiny.yaml").set_value(5).run()
    at.button(key="train_launch").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (job,) = JobRegistry(shared).list()
    assert job.state == "queued"
    # the token stays for the session: the Jobs page opens unlocked and deletes
    at.switch_page(JOBS).run()
    assert "Admin token accepted" in shown(at)
    at.button(key=f"cancel-{job.id}").click().run()
    assert JobRegistry(shared).get(job.id).state == "cancelled"
    at.button(key=f"delete-{job.id}").click().run()
    assert not at.exception
    assert JobRegistry(shared).list() == []


def test_shared_jobs_page_without_the_token_cannot_cancel_or_delete(shared):
    run = fake_run(shared, "done-run", "finished")
    at = open_page(JOBS)
    assert not at.exception
    assert "Read-only" in shown(at) and "needs the admin token" in shown(at)
    keys = {b.key for b in at.button}
    assert not any(k and k.startswith(("cancel-", "resume-", "delete-")) for k in keys), keys
    assert run.is_dir()


def test_shared_ablations_page_cannot_launch_without_the_token(shared):
    at = open_page(ABLATIONS)
    launch = next(b for b in at.get("button") if getattr(b, "label", "") == "Launch")
    assert launch.disabled
    at.text_input(key=FIELD).input(TOKEN).run()
    launch = next(b for b in at.get("button") if getattr(b, "label", "") == "Launch")
    assert not launch.disabled


def test_loopback_pages_are_unchanged(app_env):  # noqa: F811
    pytest.importorskip("gensim")  # the Train page's default corpus is the sample in gensim's wheel
    fake_run(app_env, "done-run", "finished")
    at = open_page(JOBS)
    assert not [t for t in at.text_input if t.key == FIELD]
    run_id = Path(JobRegistry(app_env).list()[0].run_dir).name
    at.button(key=f"delete-{run_id}").click().run()
    assert JobRegistry(app_env).list() == []
    at = open_page(TRAIN)
    assert not [t for t in at.text_input if t.key == FIELD]
    assert not at.button(key="train_launch").disabled


# --------------------------------------------------------------------------------------
# A class on one app: one student's jobs never hold up another's exploring
# --------------------------------------------------------------------------------------
def test_a_full_job_queue_does_not_hold_up_exploring(app_env):  # noqa: F811
    """30 queued jobs of one user, and the queue's lock held (as while a job launches): the exploring
    pages answer anyway, because nothing on them reads or waits on the job queue."""
    from bertlab.atomic import locked
    from bertlab.jobs.spec import JobSpec
    from bertlab.storage.runfolder import RUNS_LOCK_FILE

    registry = JobRegistry(app_env)
    for n in range(30):
        registry.submit(JobSpec("pretrain", ("--config", "configs/tiny.yaml"), name=f"mine-{n}"), start=False)
    assert sum(j.state == "queued" for j in registry.list(start_queued=False)) == 30
    with locked(app_env / RUNS_LOCK_FILE):  # a page that waited on the queue would time out here
        at = open_page(page_titled("Fill-mask").file)
        for page in (page_titled("Next sentence").file, page_titled("Attention").file):
            at.switch_page(page).run()
            assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]
