"""What the pages that need gradients (Why it answered, Which heads matter) say to a dynamic int8
model: the package's refusal (NoGradientsError) and a button to the float model it was made from."""

from __future__ import annotations

import streamlit as st

from bertlab.errors import NoGradientsError
from pages.common import choose_model, show_error


def _select(key: str, value: str) -> None:
    st.session_state[key] = value


def offer_original(exc: NoGradientsError, select_key: str | None = None, key: str = "use_original") -> None:
    """The refusal, and a button that switches to the original: the sidebar's model, or (with
    `select_key`) the page's own selectbox of fine-tuned models."""
    show_error(exc)
    if not exc.source:
        return
    if select_key is None:
        st.button(
            f"Use the original model ({exc.source})",
            key=key,
            icon=":material/undo:",
            on_click=choose_model,
            args=(exc.source,),
        )
    else:
        st.button(
            f"Use the original model ({exc.source})",
            key=key,
            icon=":material/undo:",
            on_click=_select,
            args=(select_key, exc.source),
        )
