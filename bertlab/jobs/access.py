"""Who may manage jobs from the web app: the rule for an app shared on the network.

On loopback (127.0.0.1, the default in .streamlit/config.toml) everyone at the app is the person at
the machine, so everyone may launch, cancel, resume and delete jobs. An app started with
`--server.address 0.0.0.0` is shared with a class: the exploring pages stay open to everyone, and
managing jobs needs the admin token of the person who started it ($BERTLAB_ADMIN_TOKEN, or one made
at start-up and printed to the server's console). The token guards the web app only: the `bertlab`
command is run by someone already at the machine.

Imports only the standard library and bertlab.jobs.spec (torch-free); never streamlit.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from bertlab.jobs.spec import is_loopback_address

ADMIN_TOKEN_ENV = "BERTLAB_ADMIN_TOKEN"
MIN_TOKEN_LENGTH = 12  # shorter tokens set by hand are accepted, with a warning at start-up
JOB_ACTIONS = "launching, cancelling, resuming and deleting jobs"


@dataclass(frozen=True)
class AdminToken:
    """The token a shared app compares against; one per server process."""

    value: str  # never shown in a page
    generated: bool  # True: made at start-up (print it once); False: from $BERTLAB_ADMIN_TOKEN


@dataclass(frozen=True)
class Access:
    """Whether this browser session may manage jobs, and why, in words a page can show as they are."""

    allowed: bool
    shared: bool  # the app is reachable from other machines (not loopback)
    reason: str


def is_shared(address: str | None) -> bool:
    """True when a server bound to `address` (Streamlit's server.address) answers other machines."""
    return not is_loopback_address(address)


def admin_token(
    environ: Mapping[str, str], generate: Callable[[], str] = lambda: secrets.token_urlsafe(16)
) -> AdminToken:
    """$BERTLAB_ADMIN_TOKEN from `environ` when set (surrounding spaces dropped), else a new random
    token (128 bits). Call it once per server process and keep the result."""
    chosen = (environ.get(ADMIN_TOKEN_ENV) or "").strip()
    if chosen:
        return AdminToken(chosen, generated=False)
    return AdminToken(generate(), generated=True)


def startup_message(address: str | None, token: AdminToken) -> str:
    """What the server's console says once when a shared app starts: a made-up token in full (the
    console belongs to the person who started the app); a chosen one by name only."""
    where = f"on {address or 'every network interface'}"
    if token.generated:
        return (
            f"BERT Lab is shared {where}. Admin token for {JOB_ACTIONS} in the app: {token.value}\n"
            f"(made for this server process; set ${ADMIN_TOKEN_ENV} before starting it to choose your own)."
        )
    message = f"BERT Lab is shared {where}. {JOB_ACTIONS.capitalize()} in the app needs ${ADMIN_TOKEN_ENV}."
    if len(token.value) < MIN_TOKEN_LENGTH:
        message += (
            f" Warning: ${ADMIN_TOKEN_ENV} is {len(token.value)} characters long; anyone who can reach the app can "
            f"try to guess it. Use {MIN_TOKEN_LENGTH} or more (python3 -c 'import secrets; print(secrets.token_urlsafe(16))')."
        )
    return message


def job_access(address: str | None, expected: str | None, typed: str | None) -> Access:
    """May the person at this browser launch, cancel, resume and delete jobs?

    Args:
        address: the server's bind address (Streamlit's `server.address`; empty = every interface).
        expected: the server's admin token (`admin_token(...).value`); unused on loopback. A shared app
            without one refuses everyone.
        typed: what the user typed in the page's token field (surrounding spaces dropped).
    """
    if not is_shared(address):
        return Access(
            True, shared=False, reason=f"This app answers this machine only ({address}); {JOB_ACTIONS} is open."
        )
    typed = (typed or "").strip()
    ask = (
        f"{JOB_ACTIONS.capitalize()} needs the admin token of the person who started the app "
        f"(${ADMIN_TOKEN_ENV}, or the token printed in the terminal where `streamlit run` started). "
        "Without it you can still look at every run and explore every model."
    )
    if not expected:
        return Access(False, shared=True, reason=f"This app is shared on the network and has no admin token set. {ask}")
    if not typed:
        return Access(False, shared=True, reason=f"This app is shared on the network. {ask}")
    # compare_digest: the time taken does not say how much of a guess was right
    if not secrets.compare_digest(typed.encode(), expected.encode()):
        return Access(False, shared=True, reason=f"That admin token is not the one this app was started with. {ask}")
    return Access(True, shared=True, reason=f"Admin token accepted: {JOB_ACTIONS} is open to you in this browser tab.")
