"""The app's page registry: every page of the Streamlit app, once, in the sidebar's order.

Each `AppPage` says where the page's script is, its title and heading, its icon and the line the
home page links it with. `app.py` and the pages read it (through `pages.common.setup_page` and
`navigation`), and so do the tests (AppTest switches to `page.file`, the browser opens
`page.url_path` and waits for `page.heading`). A new page is one script in pages/ and one entry
here; tests/test_app_pages.py checks that the two agree.

Data only: imports the standard library (no streamlit, no torch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class AppPage:
    """One page of the app."""

    file: str  # from the repository root, as st.page_link and AppTest.switch_page take it
    title: str  # the browser tab's title ("<title> · BERT Lab")
    icon: str  # Streamlit's bundled Material font, so it draws offline: sidebar, home page and tab
    blurb: str = ""  # the home page's link to it
    heading: str = ""  # the page's st.title; the title when left empty

    def __post_init__(self) -> None:
        if not self.heading:
            object.__setattr__(self, "heading", self.title)

    @property
    def url_path(self) -> str:
        """The path Streamlit serves the page at: the file name without its number ('' for Home)."""
        if self.file == HOME_FILE:
            return ""
        return re.sub(r"^\d*_?", "", Path(self.file).stem)

    @property
    def label(self) -> str:
        """The sidebar's link text: Streamlit's name for the page ('Fill mask' for 1_Fill_mask.py)."""
        return self.url_path.replace("_", " ") or "Home"


HOME_FILE = "app.py"

APP_PAGES: tuple[AppPage, ...] = (
    AppPage(HOME_FILE, "Home", ":material/home:", heading="BERT Lab"),
    AppPage("pages/1_Fill_mask.py", "Fill-mask", ":material/format_color_text:", "Fill-mask: what goes in the [MASK]?"),
    AppPage(
        "pages/2_Next_sentence.py",
        "Next sentence",
        ":material/link:",
        "Next sentence: does B follow A?",
        heading="Next sentence prediction",
    ),
    AppPage(
        "pages/3_Attention.py",
        "Attention",
        ":material/visibility:",
        "Attention: what each head looks at; switching heads off",
    ),
    AppPage(
        "pages/4_How_an_example_is_made.py",
        "How an example is made",
        ":material/extension:",
        "How a pretraining example is made",
        heading="How a pretraining example is made",
    ),
    AppPage(
        "pages/5_Train.py", "Train", ":material/model_training:", "Train: pretrain or fine-tune a BERT of your own"
    ),
    AppPage("pages/6_Jobs.py", "Jobs", ":material/work_history:", "Jobs: follow and manage training runs"),
    AppPage(
        "pages/7_Watch_it_learn.py",
        "Watch it learn",
        ":material/timeline:",
        "Watch it learn: slide through training and see the answers and heads form",
    ),
    AppPage("pages/8_Ablations.py", "Ablations", ":material/science:", "Ablations: the paper's Tables 5-8 and ours"),
    AppPage(
        "pages/9_Successors.py",
        "Successors",
        ":material/family_history:",
        "BERT's successors: RoBERTa, ALBERT, SpanBERT and ELECTRA, the papers' claims and ours",
        heading="BERT's successors",
    ),
    AppPage(
        "pages/10_Why_it_answered.py",
        "Why it answered",
        ":material/psychology_alt:",
        "Why it answered: which words made it say that; attention rollout and flow",
    ),
    AppPage(
        "pages/11_What_each_layer_knows.py",
        "What each layer knows",
        ":material/layers:",
        "What each layer knows: one word in many sentences, and probes per layer",
    ),
    AppPage(
        "pages/12_Which_heads_matter.py",
        "Which heads matter",
        ":material/account_tree:",
        "Which heads matter: head importance and pruning curves",
    ),
    AppPage(
        "pages/13_Compare_models.py",
        "Compare models",
        ":material/compare:",
        "Compare models: two models on one sentence, side by side",
    ),
    AppPage(
        "pages/14_Make_it_smaller.py",
        "Make it smaller",
        ":material/compress:",
        "Make it smaller: quantize, prune or distil a model and see what it costs and buys",
    ),
    AppPage(
        "pages/15_Long_inputs.py",
        "Long inputs",
        ":material/width_wide:",
        "Long inputs: why 512 tokens is a wall, and what sliding-window and BigBird attention read instead",
    ),
)


def app_page(file: str | Path) -> AppPage:
    """The registered page whose script is `file` (a page passes its `__file__`).

    Raises:
        KeyError: the script is not in APP_PAGES; add an AppPage for it there.
    """
    name = Path(file).name
    for page in APP_PAGES:
        if Path(page.file).name == name:
            return page
    raise KeyError(f"{name} is not a registered page; add an AppPage for it to bertlab.app_pages.APP_PAGES")


def page_titled(title: str) -> AppPage:
    """The registered page with this title ('Fill-mask', 'Jobs', ...)."""
    for page in APP_PAGES:
        if page.title == title:
            return page
    raise KeyError(f"no page titled {title!r}; the titles are {', '.join(p.title for p in APP_PAGES)}")
