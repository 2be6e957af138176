"""Who is calling the HTTPS API: PVE tickets (root@pam password login) and API tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
import warnings
from urllib.parse import unquote

from gpuhost.lab.node.errors import PveError

AUTHKEY = "/etc/pve/priv/authkey.key"
TOKENS = "/etc/pve/priv/token.cfg"
TICKET_LIFETIME_S = 2 * 3600


def _key() -> bytes:
    return open(AUTHKEY, "rb").read().strip()


def _sign(data: str) -> str:
    return base64.b64encode(hmac.new(_key(), data.encode(), hashlib.sha256).digest()).decode().rstrip("=")


def check_password(username: str, password: str) -> str:
    """The PAM login for root@pam against /etc/shadow; returns the user id or raises 401."""
    user, _, realm = username.partition("@")
    if (realm or "pam") != "pam" or user != "root":
        raise PveError("authentication failure", http_status=401)
    if password.startswith("PVE:"):  # renewing: a valid ticket of the same user stands for the password
        try:
            if verify_ticket(password)[0] == "root@pam":
                return "root@pam"
        except PveError:
            pass
        raise PveError("authentication failure", http_status=401)
    stored = ""
    for line in open("/etc/shadow"):
        fields = line.rstrip("\n").split(":")
        if fields[0] == "root":
            stored = fields[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    if not stored or crypt.crypt(password, stored) != stored:
        raise PveError("authentication failure", http_status=401)
    return "root@pam"


def new_ticket(userid: str) -> tuple[str, str]:
    stamp = f"{int(time.time()):08X}"
    plain = f"PVE:{userid}:{stamp}"
    ticket = f"{plain}::{_sign(plain)}"
    csrf = f"{stamp}:{_sign('CSRF:' + userid + ':' + stamp)}"
    return ticket, csrf


def verify_ticket(ticket: str) -> tuple[str, str]:
    """Returns (userid, stamp) or raises 401."""
    ticket = unquote(ticket)
    try:
        plain, sig = ticket.rsplit("::", 1)
        _, userid, stamp = plain.split(":", 2)
    except ValueError:
        raise PveError("invalid ticket", http_status=401) from None
    if not hmac.compare_digest(_sign(plain), sig) or time.time() - int(stamp, 16) > TICKET_LIFETIME_S:
        raise PveError("invalid ticket", http_status=401)
    return userid, stamp


def verify_csrf(userid: str, token: str | None) -> None:
    if not token:
        raise PveError("Permission denied - invalid csrf token", http_status=401)
    stamp, _, sig = token.partition(":")
    if not hmac.compare_digest(_sign("CSRF:" + userid + ":" + stamp), sig):
        raise PveError("Permission denied - invalid csrf token", http_status=401)


def verify_token(header: str) -> str:
    """``PVEAPIToken=USER@REALM!TOKENID=SECRET`` -> the token's authuser (e.g. ``root@pam!gpuhost``)."""
    value = header.split("=", 1)[1] if header.startswith("PVEAPIToken=") else header[len("PVEAPIToken ") :]
    tokenid, _, secret = value.partition("=")
    for line in open(TOKENS):
        parts = line.split()
        if len(parts) == 2 and parts[0] == tokenid and hmac.compare_digest(parts[1], secret.strip()):
            return tokenid
    raise PveError("invalid token value!", http_status=401)
