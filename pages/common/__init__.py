"""Shared page code: page setup, the sidebar model picker, cached model loading, messages, figures.

Every page of the app (Home and pages/N_*.py) starts with:

    from pages.common import setup_page, require_model
    PAGE = setup_page(__file__)   # its title, icon and heading: bertlab.app_pages.APP_PAGES
    st.title(PAGE.heading)
    lm = require_model()          # the model picked in the sidebar, loaded once (st.cache_resource)

This folder has no .py files at the top of pages/, so Streamlit does not list it as a page.
Logic lives in `bertlab`; this module only turns it into widgets and messages.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from pathlib import Path

import streamlit as st
import torch

from bertlab.ablations.view import column_widths
from bertlab.app_pages import APP_PAGES, AppPage, app_page
from bertlab.errors import BertLabError
from bertlab.explore import InputNote
from bertlab.figures.answers import image_export_available, plotly_config, to_html, to_image
from bertlab.inference import LoadedModel, load_model
from bertlab.jobs.spec import check_path_allowed, data_roots, is_loopback_address
from bertlab.models import registry
from bertlab.models.registry import HEAD_TITLES
from bertlab.storage.catalog import (
    HUB,
    CheckpointEntry,
    check_choice,
    classify,
    find_checkpoints,
    runs_root,
    shipped_model_path,
)
from bertlab.storage.hub import GOOGLE_BERTS, SUCCESSORS, cached_models, download, is_online
from bertlab.storage.modelfolder import folder_stamp
from pages.common.admin import current_access

log = logging.getLogger("bertlab.app")

MODEL_KEY = "bertlab_model"  # the chosen model (folder path or Hub id); survives page switches
_CHOICE_KEY = "bertlab_model_choice"  # the selectbox widget
_TYPED_KEY = "bertlab_model_typed"  # the "other folder" text input
_MODE_KEY = "bertlab_model_other"  # True while the user is typing a folder / Hub id
_FORMAT_KEY = "bertlab_image_format"
OTHER = "__other__"


def _set_threads() -> None:
    # Interactive calls on a small model are fastest on one or two threads; on a shared 2-core
    # machine more threads than free cores make every call 10-20x slower (spinning workers).
    wanted = os.environ.get("BERTLAB_THREADS")
    n = int(wanted) if wanted and wanted.isdigit() else max(1, min(4, (os.cpu_count() or 2) // 2))
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


def navigation() -> None:
    """Sidebar links to every registered page (.streamlit/config.toml hides Streamlit's own list,
    which would call the home page "app")."""
    with st.sidebar:
        st.markdown("### :material/science: BERT Lab")
        for page in APP_PAGES:
            st.page_link(page.file, label=page.label, icon=page.icon)
        st.divider()


def setup_page(file: str) -> AppPage:
    """Page config (wide layout, the registered title and icon), thread count, navigation and the
    sidebar model picker. `file`: the page's `__file__`. Returns its registration (the heading)."""
    page = app_page(file)
    st.set_page_config(page_title=f"{page.title} · BERT Lab", page_icon=page.icon, layout="wide")
    _set_threads()
    navigation()
    model_picker()
    return page


# --------------------------------------------------------------------------------------
# The model picker
# --------------------------------------------------------------------------------------
def chosen_model() -> str:
    """The model the user picked (a folder or Hub id); the shipped default until they pick one."""
    return st.session_state.get(MODEL_KEY) or str(shipped_model_path())


def choose_model(path: str) -> None:
    """Make `path` the chosen model, as picking it in the sidebar would (a button's on_click: the
    sidebar's widgets are seeded from it on the next run)."""
    st.session_state[MODEL_KEY] = path
    st.session_state[_MODE_KEY] = False
    st.session_state[_TYPED_KEY] = path


def _on_choice() -> None:
    value = st.session_state.get(_CHOICE_KEY)
    st.session_state[_MODE_KEY] = value == OTHER
    if value == OTHER:
        typed = (st.session_state.get(_TYPED_KEY) or "").strip()
        if typed:
            st.session_state[MODEL_KEY] = typed
    elif value:
        st.session_state[MODEL_KEY] = value


def _on_typed() -> None:
    typed = (st.session_state.get(_TYPED_KEY) or "").strip()
    if typed:
        st.session_state[MODEL_KEY] = typed


def model_picker() -> str:
    """Sidebar: pick the shipped model, a local checkpoint, a finished run, or type a folder / Hub id.

    Returns the chosen model (also kept in `st.session_state["bertlab_model"]` for every page).
    """
    # fine-tuned runs have a task head and no masked-LM head: no page here can load them (the Jobs page tries them)
    entries = find_checkpoints(include_finetuned=False)
    known = {e.path for e in entries}
    entries += [
        CheckpointEntry(
            f"{repo_id} (Hub, cached)", str(path), HUB, True, "Google's release, from the local Hugging Face cache"
        )
        for repo_id, path in cached_models().items()
        if str(path) not in known
    ]
    by_path = {e.path: e for e in entries}
    current = chosen_model()
    # Seed the widgets from the session's choice on every run: widget state does not follow
    # the user across pages, the MODEL_KEY value does.
    other = st.session_state.get(_MODE_KEY, False) or current not in by_path
    st.session_state[_CHOICE_KEY] = OTHER if other else current
    if current not in by_path:
        st.session_state[_TYPED_KEY] = current
    elif _TYPED_KEY not in st.session_state:
        st.session_state[_TYPED_KEY] = ""

    def label(value: str) -> str:
        if value == OTHER:
            return "Another folder or Hub id…"
        e = by_path[value]
        return e.label if e.exists else f"{e.label} — not built yet"

    with st.sidebar:
        st.markdown("### Model")
        st.selectbox(
            "Model",
            [e.path for e in entries] + [OTHER],
            format_func=label,
            key=_CHOICE_KEY,
            on_change=_on_choice,
            label_visibility="collapsed",
            help="The shipped default, checkpoints under checkpoints/, and finished pretraining runs (runs/<id>/model). "
            "Fine-tuned runs are tried on the Jobs page.",
        )
        if other:
            st.text_input(
                "Checkpoint folder or Hub id",
                key=_TYPED_KEY,
                on_change=_on_typed,
                placeholder="/path/to/checkpoint or google-bert/bert-base-uncased",
                help="A folder with config.json, model.safetensors (or pytorch_model.bin) and vocab.txt. "
                "A Hub id works when online.",
            )
        else:
            e = by_path.get(current)
            if e is not None and e.summary:
                st.caption(e.summary)
        _google_berts()
        st.radio(
            "Camera button on figures saves",
            ["png", "svg"],
            key=_FORMAT_KEY,
            horizontal=True,
            help="Every figure has a camera button (top right when you hover it). HTML export is always offered.",
        )
    return current


@st.cache_data(ttl=60, show_spinner=False)
def _online() -> bool:
    return is_online()


def _google_berts() -> None:
    """Sidebar: Google's released BERTs and BERT's successors, one click away when online; what is
    cached when offline."""
    with st.expander("Google's BERTs and successors", icon=":material/cloud_download:"):
        if not _online():
            cached = cached_models()
            st.caption(
                "Offline: Google's BERTs and the successors (RoBERTa, DistilBERT, ELECTRA, SpanBERT, ALBERT) "
                "cannot be downloaded now. "
                + (f"Cached here and listed above: {', '.join(cached)}." if cached else "None is cached here.")
            )
            return
        choice = st.selectbox(
            "Checkpoint",
            GOOGLE_BERTS + SUCCESSORS,
            format_func=lambda m: m.label if m.family == "BERT" and m in GOOGLE_BERTS else f"{m.family} · {m.label}",
            key="bertlab_hub_pick",
            help="Google's BERT-base/large and the 24 small BERTs (Turc et al. 2019), then BERT's successors as "
            "their authors released them. The download lands in the usual Hugging Face cache and is listed "
            "above from then on.",
        )
        if not choice.opens:
            st.caption(f":material/block: {choice.note}: not offered for download.")
        access = current_access()  # a download can be gigabytes: on a shared app it needs the admin token
        if not access.allowed:
            st.caption(
                ":material/lock: On a shared app, downloading needs the admin token of whoever started it "
                "(type it on the Train or Jobs page)."
            )
        if st.button(
            "Download and use",
            key="bertlab_hub_go",
            icon=":material/download:",
            disabled=not access.allowed or not choice.opens,
        ):
            if not current_access().allowed:  # checked again on the click itself
                return
            bar = st.progress(0.0, text=f"Fetching {choice.repo_id}...")
            try:
                path = download(choice.repo_id, lambda f, text: bar.progress(min(1.0, f), text=text))
            except BertLabError as exc:
                show_error(exc)
                return
            st.session_state[MODEL_KEY] = str(path)
            st.session_state[_MODE_KEY] = False
            st.rerun()


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------
def code_version() -> int:
    """Changes when Streamlit imports the package again after a source file changed (a `git pull` with
    the app open: it unloads every watched module). A model cached before is an instance of the old
    classes, which the new code's type checks refuse; a model cache keyed on this loads it again. The class,
    not its module: a cached model keeps its old class alive, so the new one cannot reuse its id."""
    return id(sys.modules[LoadedModel.__module__].LoadedModel)


@st.cache_resource(show_spinner="Loading the model…", max_entries=4)
def _load(path: str, stamp: float, code: int) -> LoadedModel:
    lm = load_model(path, device="auto")
    log.info("loaded %s on %s (%s parameters)", path, lm.device, f"{lm.num_parameters():,}")
    return lm


def load_chosen_model() -> tuple[LoadedModel | None, str | None]:
    """(model, None) or (None, a plain message saying what is wrong and what to do)."""
    choice = chosen_model()
    shipped = str(shipped_model_path())
    if not is_loopback_address(st.get_option("server.address")) and choice.strip() and classify(choice.strip()) != HUB:
        # shared app: a folder outside the data roots gets one message whether or not it exists,
        # so the picker tells nobody which server paths exist
        try:
            check_path_allowed(choice.strip(), roots=[*data_roots(), runs_root(), shipped_model_path()], cwd=Path.cwd())
        except BertLabError:
            return None, (
                f"**{choice}** is outside the folders this shared app may read (BERTLAB_DATA_ROOTS). "
                "Pick another model in the sidebar."
            )
    try:
        cleaned = check_choice(choice)
        return _load(cleaned, folder_stamp(cleaned) if classify(cleaned) != HUB else 0.0, code_version()), None
    except BertLabError as exc:
        if choice == shipped and not Path(shipped).exists():
            return None, (
                f"The default model `{shipped}` has not been built yet. Pick another model in the sidebar "
                "(a checkpoint folder or a finished run), or train one on the Train page."
            )
        # the package's messages start with the path or id the user typed; the sentence here names it already
        reason = str(exc).removeprefix(f"{choice.strip()}: ").rstrip(". ")
        return None, f"Could not load **{choice}**: {reason}. Pick another model in the sidebar."
    except Exception as exc:  # a broken file can fail anywhere in torch/safetensors; never show a traceback
        log.exception("loading %s failed", choice)
        return None, f"Could not load **{choice}** ({type(exc).__name__}: {exc}). Pick another model in the sidebar."


def heads_in_words(lm: LoadedModel, offer: bool = False) -> str:
    """The heads a model has, in words ("masked LM, sentence order prediction"), for messages; `offer`:
    with the page that shows each (bertlab.models.registry.heads_in_words)."""
    return registry.heads_in_words(lm.heads, offer)


def require_model(needs: tuple[str, ...] = (), unless: tuple[str, ...] = ()) -> LoadedModel:
    """The chosen model, or an error message and `st.stop()`: the page never goes on without one.

    `needs`: heads the page cannot work without ("mlm", "nsp": bertlab.models.registry.HEAD_TITLES);
    a model lacking one gets a message naming what it has and the pages that can use it. `unless`:
    heads for which the page has a view of its own, so a model with one goes on without `needs`
    (Fill-mask shows an ELECTRA discriminator, "rtd", its replaced-token view)."""
    lm, message = load_chosen_model()
    if lm is None:
        st.error(message, icon=":material/warning:")
        st.stop()
    missing = [HEAD_TITLES.get(h, h) for h in needs if h not in lm.heads]
    if missing and not any(h in lm.heads for h in unless):
        has = heads_in_words(lm)
        st.info(
            f"This page needs a {' and a '.join(missing)} head, and the model picked has {has}. "
            "Pick a pretrained model in the sidebar; Attention and What each layer knows read only the encoder "
            "and work with this one.",
            icon=":material/info:",
        )
        st.stop()
    with st.sidebar:
        c = lm.config
        st.caption(
            f"Loaded on **{lm.device.type.upper()}**: L={c.num_layers}, H={c.hidden_size}, A={c.num_heads} · "
            f"{lm.num_parameters() / 1e6:.1f}M parameters"
        )
    return lm


def load_half(lm: LoadedModel, half: str) -> LoadedModel | None:
    """A pair folder's half (ELECTRA's "discriminator" or "generator": `LoadedModel.halves`), loaded
    once as the chosen model is; None when the chosen folder holds one model."""
    path = lm.halves.get(half)
    if not path:
        return None
    return _load(path, folder_stamp(path), code_version())


HALF_ROLES = {"generator": "its masked LM", "discriminator": "the model that fine-tunes"}


def shown_half(lm: LoadedModel, half: str) -> LoadedModel:
    """What a page reads of the chosen model: a pair folder's `half` ("generator" where the page needs a
    masked LM, "discriminator" where it reads the encoder), said in one caption line; `lm` itself for a
    folder of one model. A pair folder opens as its first half (the generator), so that one is `lm`."""
    if not lm.halves or half not in lm.halves:
        return lm
    model = lm if half == next(iter(lm.halves)) else load_half(lm, half)
    st.caption(f"An ELECTRA pair: this page shows its **{half}** ({HALF_ROLES.get(half, half)}).")
    return model


# --------------------------------------------------------------------------------------
# Messages and layout
# --------------------------------------------------------------------------------------
def forget_on_change(key: str, depends_on: object) -> None:
    """Drop widget `key`'s state when what its options come from (`depends_on`) changed since the last
    run: a word picked in the sentence before, or a file typed for the model before, is not kept."""
    seen = f"_{key}_for"
    if seen in st.session_state and st.session_state[seen] != depends_on:
        st.session_state.pop(key, None)
    st.session_state[seen] = depends_on


def show_notes(notes: Iterable[InputNote]) -> None:
    for note in notes:
        (st.warning if note.level == "warning" else st.info)(note.message)


def show_error(exc: BaseException) -> None:
    """A plain message for an error the user can fix (BertLabError); logged otherwise."""
    if isinstance(exc, BertLabError):
        st.warning(str(exc)[0].upper() + str(exc)[1:], icon=":material/edit_note:")
    else:
        log.exception("unexpected error", exc_info=exc)
        st.error(f"Something went wrong ({type(exc).__name__}: {exc}). Try another input.")


def fitted(rows: list[dict]) -> dict:
    """Each column as wide as its name and its longest cell (no cut-off header); the row's name pinned,
    so that it stays in view while a wide table scrolls sideways within the page."""
    return {k: st.column_config.Column(width=w, pinned=k in ("variant", "row")) for k, w in column_widths(rows).items()}


def concept(text: str) -> None:
    """The page's idea in the paper's terms, in a box beside the controls."""
    with st.container(border=True):
        st.markdown(text)


def show_figure(fig, name: str, key: str | None = None, export: bool = True) -> None:
    """Draw a plotly figure with its camera button set to the chosen format, plus download buttons.

    HTML is always offered (plotly.js inlined, so it opens offline); PNG/SVG files too when
    kaleido is installed. The file is built only when the button is clicked.
    """
    fmt = st.session_state.get(_FORMAT_KEY, "png")
    st.plotly_chart(fig, config=plotly_config(name, fmt), key=key)
    if not export:
        return
    row = st.container(horizontal=True, gap="small")
    row.download_button(
        "HTML",
        data=lambda: to_html(fig),
        file_name=f"{name}.html",
        mime="text/html",
        key=f"dl-html-{key or name}",
        on_click="ignore",
        icon=":material/download:",
    )
    if image_export_available():
        row.download_button(
            "PNG",
            data=lambda: to_image(fig, "png"),
            file_name=f"{name}.png",
            mime="image/png",
            key=f"dl-png-{key or name}",
            on_click="ignore",
        )
        row.download_button(
            "SVG",
            data=lambda: to_image(fig, "svg"),
            file_name=f"{name}.svg",
            mime="image/svg+xml",
            key=f"dl-svg-{key or name}",
            on_click="ignore",
        )
