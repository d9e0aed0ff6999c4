"""The admin token of a shared app, in page form: the field on the Train, Jobs and Ablations pages,
and the console line at start-up. The rule itself is bertlab.jobs.access.job_access."""

from __future__ import annotations

import os
import sys

import streamlit as st

from bertlab.jobs.access import Access, AdminToken, admin_token, is_shared, job_access, startup_message

TOKEN_KEY = "bertlab_admin_token"  # what this session typed; kept across pages (widget state is not)
_FIELD_KEY = "bertlab_admin_token_field"


@st.cache_resource(show_spinner=False)
def server_token() -> AdminToken:
    """Once per server process: $BERTLAB_ADMIN_TOKEN or a new token, announced on the server's console
    (where the person who started the app reads it; never in a page)."""
    token = admin_token(os.environ)
    print(startup_message(st.get_option("server.address"), token), file=sys.stderr, flush=True)
    return token


def announce() -> None:
    """Make (and print) the token as soon as the first page of a shared app runs; nothing on loopback."""
    if is_shared(st.get_option("server.address")):
        server_token()


def _keep_typed() -> None:
    st.session_state[TOKEN_KEY] = st.session_state.get(_FIELD_KEY, "")


def current_access() -> Access:
    """What this session may do now, from the token it typed on any page; draws nothing."""
    address = st.get_option("server.address")
    if not is_shared(address):
        return job_access(address, None, None)
    return job_access(address, server_token().value, st.session_state.get(TOKEN_KEY))


def job_access_field() -> Access:
    """Loopback: allowed, nothing drawn. Shared: the token field (with the reason while refused)."""
    address = st.get_option("server.address")
    if not is_shared(address):
        return job_access(address, None, None)
    if _FIELD_KEY not in st.session_state:  # seed from the session: the field is new on every page
        st.session_state[_FIELD_KEY] = st.session_state.get(TOKEN_KEY, "")
    access = job_access(address, server_token().value, st.session_state.get(TOKEN_KEY))
    if access.allowed:
        st.caption(f":material/key: {access.reason}")
        return access
    with st.container(border=True):
        st.markdown(f":material/lock: {access.reason}")
        st.text_input(
            "Admin token",
            type="password",
            key=_FIELD_KEY,
            on_change=_keep_typed,
            help="Ask the person who started the app. It stays for this browser tab until you close it.",
        )
    return access
