"""The real app in a real browser: `streamlit run app.py` driven by Playwright on Debian's Chromium.

Opens every page, waits until the script has finished running, checks that no exception or
error box appears and that the figures render, tries one bad input, and saves a full-page
screenshot of each page to $BERTLAB_SCREENSHOTS (or the test's tmp_path).

Skips with a reason when /usr/bin/chromium or playwright is missing. $BERTLAB_BROWSER_MODEL
points the app at another checkpoint (e.g. a trained one for nicer screenshots).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from test_app_successors import tiny_roberta  # noqa: F401  (a fixture)
from test_history import make_run

from bertlab.app_pages import APP_PAGES, page_titled

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"

# the selector that proves a page drew its main content: a figure, unless named here
CONTENT = {
    "How an example is made": "[data-testid='stMetric']",
    "Train": "[data-testid='stMetric']",
    "Jobs": "[data-testid='stMarkdown']",
    "Successors": "[data-testid='stTable']",
}
# (url path, heading, content selector) of every registered page
PAGES = [(p.url_path, p.heading, CONTENT.get(p.title, ".js-plotly-plot")) for p in APP_PAGES]
ABLATIONS, FILL, ATTENTION, WATCH, TRAIN = (
    page_titled(t) for t in ("Ablations", "Fill-mask", "Attention", "Watch it learn", "Train")
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode} before serving")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"streamlit did not answer on {url} within {timeout:.0f}s")


def _wait_idle(page, timeout: float = 60.0) -> None:
    """Until the app has rendered and the 'running' status widget stayed gone for a moment."""
    page.wait_for_selector("[data-testid='stMainBlockContainer']", timeout=timeout * 1000)
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline:
        running = page.locator("[data-testid='stStatusWidget']").count() > 0
        quiet = 0 if running else quiet + 1
        if quiet >= 4:
            return
        page.wait_for_timeout(250)
    raise TimeoutError(f"the app kept running for more than {timeout:.0f}s")


def _screenshot(page, path: Path) -> None:
    """The whole page: Streamlit scrolls an inner element, so grow the viewport to its height."""
    height = page.evaluate(
        """() => Math.max(...[document.querySelector("[data-testid='stMain']"),
                              document.querySelector("[data-testid='stAppViewContainer']"),
                              document.documentElement].filter(Boolean).map(e => e.scrollHeight))"""
    )
    width = page.viewport_size["width"]
    page.set_viewport_size({"width": width, "height": min(max(int(height), 600), 8000)})
    page.wait_for_timeout(700)  # plotly re-lays out on resize
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": width, "height": 1000})


def _check_clean(page, name: str) -> None:
    exceptions = page.locator("[data-testid='stException']")
    assert exceptions.count() == 0, f"{name}: exception shown: {exceptions.first.inner_text()[:500]}"
    errors = page.locator("[data-testid='stAlertContentError']")
    assert errors.count() == 0, f"{name}: error shown: {errors.first.inner_text()[:500]}"


@pytest.fixture(scope="module")
def browser_model(tiny_checkpoint) -> Path:
    override = os.environ.get("BERTLAB_BROWSER_MODEL")
    return Path(override) if override else tiny_checkpoint


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tokenizer) -> Path:
    """The app's runs folder: no real runs in the picker; one tiny run that kept snapshots."""
    folder = tmp_path_factory.mktemp("runs")
    make_run(folder, tokenizer)
    return folder


@pytest.fixture(scope="module")
def server(browser_model, tmp_path_factory, runs):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")
    port = _free_port()
    env = dict(os.environ)
    env.update(
        BERTLAB_MODEL=str(browser_model),
        BERTLAB_RUNS=str(runs),
        HF_HUB_OFFLINE="1",
        BERTLAB_THREADS="1",
    )
    log_path = tmp_path_factory.mktemp("server") / "streamlit.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--browser.gatherUsageStats",
                "false",
                "--server.fileWatcherType",
                "none",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            try:
                _wait_healthy(url, proc)
            except (RuntimeError, TimeoutError) as exc:
                pytest.fail(f"{exc}\n--- server log ---\n{log_path.read_text(errors='replace')[-3000:]}")
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@pytest.fixture(scope="module")
def browser(server):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("BERTLAB_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    try:
        yield pg
    finally:
        context.close()


@pytest.mark.parametrize("path,title,content", PAGES, ids=[p[0] or "Home" for p in PAGES])
def test_page_renders(server, page, shots, path, title, content):
    page.goto(f"{server}/{path}", timeout=60_000)
    # the title first: a cold first load stays blank (no status widget yet) for over a second
    page.get_by_role("heading", name=title).first.wait_for(timeout=60_000)
    _wait_idle(page)
    page.wait_for_selector(content, timeout=30_000)
    _wait_idle(page)
    _check_clean(page, path or "Home")
    if content == ".js-plotly-plot":
        assert page.locator(".js-plotly-plot").count() >= 1
    _screenshot(page, shots / f"{path or 'Home'}.png")


def _open_ablations_table(page, server: str, table: str) -> None:
    """The Ablations page with one of the paper's tables picked, rendered."""
    from bertlab.ablations.paper import PAPER

    page.goto(f"{server}/{ABLATIONS.url_path}", timeout=60_000)
    page.get_by_role("heading", name=ABLATIONS.heading).first.wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_text(PAPER[table].title, exact=True).first.click()
    _wait_idle(page)


@pytest.mark.parametrize("table", ["table5", "table6", "table7", "table8"])
def test_ablations_every_table(server, page, shots, table):
    """Each table renders clean: the committed ones with our rows and the differences figure, one
    without results with the command that makes them (screenshots: check that no column name is cut)."""
    from bertlab.ablations.results import results_files, results_root

    _open_ablations_table(page, server, table)
    if table in results_files(results_root()):
        page.wait_for_selector(".js-plotly-plot", timeout=30_000)
        page.get_by_text("What this table teaches").first.wait_for(timeout=30_000)
    else:
        page.get_by_text("No results yet").first.wait_for(timeout=30_000)
    _check_clean(page, table)
    _screenshot(page, shots / f"Ablations-{table}.png")


@pytest.mark.parametrize(
    ("table", "rendered", "option", "marker", "shot"),
    [
        (
            "table6",
            "Every (layers, width, heads) shape",
            "learning rate 5e-4",
            "Held-out perplexity: better or level at every step in size",
            "table6-lr5e-4",
        ),
        ("table7", "One pretrained model, frozen", "stage 2", "32M fewer tokens of pretraining", "table7-stage2"),
    ],
)
def test_ablations_second_result_set(server, page, shots, table, rendered, option, marker, shot):
    """A table's second committed set (Table 6: the same shapes at 5e-4; Table 7: the shipped model as it
    was after stage 2) is one pick away in the Results box and renders clean, with its own reading."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    _open_ablations_table(page, server, table)
    # the Results box once the table has rendered (its caption is there), then its second set; the
    # list can close again while the app is still re-running, so open it until the option is there
    page.get_by_text(rendered).first.wait_for(timeout=30_000)
    box = page.locator("[data-testid='stSelectbox']").filter(has_text="Results").first
    for attempt in range(3):
        _wait_idle(page)
        box.click()
        try:
            page.get_by_role("option", name=re.compile(option)).first.click(timeout=10_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    _wait_idle(page)
    page.get_by_text("What it shows").first.wait_for(timeout=30_000)
    page.get_by_text(marker).first.wait_for(timeout=30_000)
    _check_clean(page, f"{table}, second set")
    _screenshot(page, shots / f"Ablations-{shot}.png")


def test_fill_mask_without_mask_warns(server, page, shots):
    page.goto(f"{server}/{FILL.url_path}", timeout=60_000)
    _wait_idle(page)
    box = page.get_by_role("textbox", name="Sentence with one or more [MASK]", exact=True)
    box.fill("A sentence without any mask at all.")
    box.press("Control+Enter")
    page.wait_for_selector("[data-testid='stAlertContentWarning']", timeout=30_000)
    _wait_idle(page)
    _check_clean(page, "Fill_mask (no mask)")
    assert "no [MASK]" in page.locator("[data-testid='stAlertContentWarning']").first.inner_text()
    _screenshot(page, shots / "Fill_mask-no-mask.png")


def test_attention_tabs(server, page, shots):
    page.goto(f"{server}/{ATTENTION.url_path}", timeout=60_000)
    _wait_idle(page)

    def visit(tab: str, name: str, act=None) -> None:
        """Open `tab`, do `act` there, check the page is clean and save Attention-<name>.png."""
        page.get_by_role("tab", name=tab).click()
        _wait_idle(page)
        if act is not None:
            act()
        _check_clean(page, f"Attention ({name})")
        _screenshot(page, shots / f"Attention-{name}.png")

    visit("All heads", "all-heads", lambda: page.locator(".js-plotly-plot").first.wait_for(timeout=30_000))
    visit("Head statistics", "statistics")

    def switch_off_layer() -> None:
        page.get_by_role("button", name="Switch off this layer").click()
        _wait_idle(page)
        page.get_by_text("switched off on this page").first.wait_for(timeout=30_000)

    visit("Switch heads off", "heads-off", switch_off_layer)

    def show_bertviz() -> None:
        page.get_by_text("Show bertviz").first.click()
        _wait_idle(page)

    visit("bertviz", "bertviz", show_bertviz)  # offline the view may stay blank, but nothing breaks


def test_fill_mask_click_a_word(server, page, shots):
    page.goto(f"{server}/{FILL.url_path}", timeout=60_000)
    _wait_idle(page)
    page.get_by_text("Click words to mask them", exact=True).click()
    _wait_idle(page)
    page.get_by_text("store", exact=True).first.click()  # a word pill
    _wait_idle(page)
    page.get_by_text("The model reads:").first.wait_for(timeout=30_000)
    _check_clean(page, "Fill_mask (click a word)")
    assert page.locator(".js-plotly-plot").count() >= 1
    _screenshot(page, shots / "Fill_mask-click.png")


def test_watch_it_learn_on_a_tiny_run(server, page, shots):
    page.goto(f"{server}/{WATCH.url_path}?run=tiny-run", timeout=60_000)
    _wait_idle(page)
    page.get_by_role("heading", name=WATCH.heading).first.wait_for(timeout=30_000)
    page.wait_for_selector(".js-plotly-plot", timeout=60_000)  # the history is built on this first visit
    _wait_idle(page)
    _check_clean(page, "Watch it learn (tiny run)")
    boxes = page.locator("input[role='combobox']")
    assert "Run tiny-run" in [boxes.nth(i).input_value() for i in range(boxes.count())]  # the ?run= link picked it
    assert page.locator(".js-plotly-plot").count() >= 4
    _screenshot(page, shots / "Watch_it_learn-tiny-run.png")


def test_train_finetune_with_the_papers_task_layers(server, page, shots, tmp_path):
    """The fine-tuning form's task-layer options (Table 7's features, Table 5's + BiLSTM, the added layers' rate,
    the seed, an epoch budget) open, take input and keep the estimate clean."""
    data = tmp_path / "sst2"
    data.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (data / name).write_text("sentence\tlabel\n" + "a fine film\t1\na dull one\t0\n" * 20)
    page.goto(f"{server}/{TRAIN.url_path}", timeout=60_000)
    page.get_by_role("heading", name=TRAIN.heading).first.wait_for(timeout=60_000)
    _wait_idle(page)
    page.get_by_text("Fine-tune on a task", exact=True).first.click()
    _wait_idle(page)
    box = page.get_by_role("textbox", name="Data folder", exact=True)
    box.fill(str(data))
    box.press("Enter")
    _wait_idle(page)
    page.get_by_text("Task layer and seed").first.click()
    _wait_idle(page)
    page.get_by_text("BiLSTM before the output layer").first.click()
    _wait_idle(page)
    page.get_by_text("Epochs", exact=True).first.click()
    _wait_idle(page)
    page.wait_for_selector("[data-testid='stMetric']", timeout=30_000)
    _check_clean(page, "Train (fine-tune, task layer)")
    assert page.get_by_role("checkbox", name="BiLSTM before the output layer").is_checked()
    _screenshot(page, shots / "Train-finetune-task-layer.png")


def _use_folder(page, server: str, url_path: str, folder: Path) -> None:
    """Open a page, then type `folder` into the sidebar picker (Another folder or Hub id…), as a user does."""
    page.goto(f"{server}/{url_path}", timeout=60_000)
    _wait_idle(page)
    page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").first.click()
    page.get_by_role("option", name="Another folder or Hub id…").click()
    _wait_idle(page)
    box = page.get_by_role("textbox", name="Checkpoint folder or Hub id", exact=True)
    box.fill(str(folder))
    box.press("Enter")
    _wait_idle(page)


def test_electra_replaced_token_view(server, page, shots, tiny_electra_pair):
    """A pair folder on Fill-mask: the generator's answers, and in the ELECTRA box the discriminator
    judging a sentence the generator corrupted (orange bars with the token they replaced)."""
    _use_folder(page, server, FILL.url_path, tiny_electra_pair)
    page.get_by_text("ELECTRA pair").first.click()  # open the box
    _wait_idle(page)
    page.get_by_text("Let the generator corrupt one", exact=True).first.click()
    _wait_idle(page)
    page.get_by_text("Discriminator right on").first.wait_for(timeout=30_000)
    page.get_by_text("P(replaced) for every token").first.wait_for(timeout=30_000)
    _check_clean(page, "Fill_mask (ELECTRA pair)")
    assert page.get_by_text("its generator").count() >= 1
    _screenshot(page, shots / "Fill_mask-electra-replaced.png")


def test_albert_sentence_order_view(server, page, shots, tiny_albert_checkpoint):
    _use_folder(page, server, page_titled("Next sentence").url_path, tiny_albert_checkpoint)
    page.get_by_text("Are A and B in order?").first.wait_for(timeout=30_000)
    page.get_by_text("the other way round, B then A").first.wait_for(timeout=30_000)
    _check_clean(page, "Next sentence (ALBERT)")
    assert "P(in order)" in page.locator("[data-testid='stMetric']").first.inner_text()
    _screenshot(page, shots / "Next_sentence-albert-sop.png")


def test_electra_discriminator_alone(server, page, shots, tiny_electra_pair):
    """A discriminator folder: no masked LM, so Fill-mask says so and shows P(replaced) for a typed sentence."""
    _use_folder(page, server, FILL.url_path, tiny_electra_pair / "discriminator")
    page.get_by_text("P(replaced) for every token").first.wait_for(timeout=30_000)
    _check_clean(page, "Fill_mask (ELECTRA discriminator)")
    assert "cannot fill a [MASK]" in page.locator("[data-testid='stAlertContentInfo']").first.inner_text()
    _screenshot(page, shots / "Fill_mask-electra-discriminator.png")


def test_long_model_attention_on_a_long_text(server, page, shots):
    """The shipped long model on Long inputs: its own attention on the built-in ~2,000-token text, drawn
    as tiles (the band and [CLS]'s column), with the memory a full map would need."""
    _use_folder(page, server, page_titled("Long inputs").url_path, REPO / "checkpoints" / "bertlab-mini-long")
    page.get_by_text("reads 4,096 tokens", exact=False).first.wait_for(timeout=30_000)
    page.get_by_role("button", name="Read it").click()
    _wait_idle(page, timeout=120)
    page.get_by_text("full attention's would be", exact=False).first.wait_for(timeout=60_000)
    _check_clean(page, "Long_inputs (long model)")
    page.mouse.wheel(0, 5000)  # Streamlit draws a figure once it scrolls into view
    page.wait_for_timeout(1500)
    _screenshot(page, shots / "Long_inputs-long-model.png")
    assert page.locator(".js-plotly-plot").count() >= 4  # pattern, two cost curves, the model's attention


# one tiny model of each family on the page that shows its own head, then on Attention (#54); BERT is
# slow-marked: test_page_renders opens both pages with the same tiny BERT (the server's default)
FAMILY_VIEWS = [
    pytest.param("tiny_checkpoint", "", FILL, id="BERT", marks=pytest.mark.slow),
    pytest.param("tiny_roberta", "", FILL, id="RoBERTa"),
    pytest.param("tiny_albert_checkpoint", "", page_titled("Next sentence"), id="ALBERT"),
    pytest.param("tiny_electra_pair", "", FILL, id="ELECTRA-pair"),
    pytest.param("tiny_electra_pair", "discriminator", FILL, id="ELECTRA-discriminator"),
    pytest.param("tiny_distilbert_checkpoint", "", FILL, id="DistilBERT"),
]


@pytest.mark.parametrize(("fixture", "half", "first"), FAMILY_VIEWS)
def test_each_family_on_its_page_and_attention(server, page, shots, request, fixture, half, first):
    """The family's tiny model typed into the picker: its own page (the answers, P(replaced) for a
    discriminator, P(in order) for ALBERT) and Attention draw clean, with byte-level pieces drawn as text."""
    family = request.node.callspec.id
    folder = request.getfixturevalue(fixture) / half if half else request.getfixturevalue(fixture)
    for shown in (first, ATTENTION):
        _use_folder(page, server, shown.url_path, folder)
        page.get_by_role("heading", name=shown.heading).first.wait_for(timeout=60_000)
        page.locator(".js-plotly-plot:visible").first.wait_for(timeout=30_000)  # not the pair's closed ELECTRA box
        _wait_idle(page)
        _check_clean(page, f"{shown.title} ({family})")
        box = page.get_by_role("textbox", name="Checkpoint folder or Hub id", exact=True)
        assert box.input_value() == str(folder)  # the page read the family's model, not the default
        assert page.locator(".js-plotly-plot").count() >= (2 if shown is ATTENTION else 1)
        drawn = page.locator("[data-testid='stMain']").text_content()  # SVG text too: axes, bars' labels
        assert "Ġ" not in drawn, f"{shown.title} ({family}) draws raw byte-level pieces"
        _screenshot(page, shots / f"{shown.url_path}-{family}.png")
