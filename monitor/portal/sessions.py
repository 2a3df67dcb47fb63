"""Portal sessions kept on the server, in the store (table ``portal_sessions``).

The signed cookie names the account and carries a random session id; a request is let in only
while the store holds that id for that account, unexpired, and bound to the account's current
credentials. So a session ends on the server when:

- the user logs out (its row is deleted: a copy of the cookie opens nothing afterwards);
- the account's password hash changes in the configuration, or the account is removed and
  later added again with the same name (the row's ``credential``, an HMAC of the password
  hash under the portal's secret key, no longer matches);
- ``session_hours`` have passed since the login (not since the last request).

Sessions survive a portal restart (same ``secret_key``). The table is bounded: expired rows
are deleted at every login and at start-up (with those of removed or changed accounts), and
an account keeps at most MAX_PER_ACCOUNT sessions, its oldest ended first.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from monitor.config import AccountConfig
from monitor.journal.store import Store
from monitor.wire.canonical import to_us

MAX_PER_ACCOUNT = 32


def _row_id(session_id: str) -> str:
    # Only the id's digest is stored: reading the store does not give a usable session.
    return hashlib.sha256(session_id.encode()).hexdigest()


class Sessions:
    def __init__(
        self, store: Callable[[], Store], key: str, hours: float, clock: Callable[[], datetime]
    ) -> None:
        self.store = store  # the calling thread's Store (sqlite3 connections stay in their thread)
        self.key = key.encode()
        self.lifetime = timedelta(hours=hours)
        self.clock = clock

    def credential(self, account: AccountConfig) -> str:
        """What a session is bound to: a new password hash (or a new account) never matches."""
        return hmac.new(self.key, account.password_hash.encode(), hashlib.sha256).hexdigest()

    def open(self, account: AccountConfig) -> str:
        """A new session for ``account``; returns the id the cookie carries."""
        session_id = secrets.token_urlsafe(32)
        now = self.clock()
        store = self.store()
        with store.batch():
            store.conn.execute("DELETE FROM portal_sessions WHERE expires_us <= ?", (to_us(now),))
            store.conn.execute(
                "INSERT INTO portal_sessions VALUES (?,?,?,?,?)",
                (
                    _row_id(session_id),
                    account.name,
                    self.credential(account),
                    to_us(now),
                    to_us(now + self.lifetime),
                ),
            )
            store.conn.execute(
                "DELETE FROM portal_sessions WHERE account = ? AND id NOT IN (SELECT id FROM"
                " portal_sessions WHERE account = ? ORDER BY created_us DESC LIMIT ?)",
                (account.name, account.name, MAX_PER_ACCOUNT),
            )
        return session_id

    def valid(self, session_id: object, account: AccountConfig) -> bool:
        """Whether the cookie's session is still open on the server for this account."""
        if not isinstance(session_id, str):
            return False
        row = (
            self.store()
            .conn.execute(
                "SELECT account, credential, expires_us FROM portal_sessions WHERE id = ?",
                (_row_id(session_id),),
            )
            .fetchone()
        )
        return (
            row is not None
            and row["account"] == account.name
            and row["expires_us"] > to_us(self.clock())
            and hmac.compare_digest(row["credential"], self.credential(account))
        )

    def close(self, session_id: object) -> None:
        if isinstance(session_id, str):
            self.store().conn.execute("DELETE FROM portal_sessions WHERE id = ?", (_row_id(session_id),))

    def forget_stale(self, accounts: Mapping[str, AccountConfig]) -> int:
        """Ends (deletes) the expired sessions and those of accounts removed or whose password
        changed since: run at start-up, with the configuration the portal serves."""
        store = self.store()
        now = to_us(self.clock())
        stale = [
            (row["id"],)
            for row in store.conn.execute("SELECT id, account, credential, expires_us FROM portal_sessions")
            if row["expires_us"] <= now
            or row["account"] not in accounts
            or not hmac.compare_digest(row["credential"], self.credential(accounts[row["account"]]))
        ]
        with store.batch():
            store.conn.executemany("DELETE FROM portal_sessions WHERE id = ?", stale)
        return len(stale)
