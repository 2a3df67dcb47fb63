"""A portal over a store a test filled, with an inspector's time scope beside the Town's account
(the time-scope tests of the portal and of bundles)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.config import Config
from monitor.journal import queries
from monitor.journal.store import Store
from monitor.portal.data import Portal, Scope, User
from tests.support.notices import SITE

NOW = datetime(2026, 12, 10, tzinfo=UTC)  # the portal's clock: days after every scope here


def anchored_scopes(
    store: Store, config: Config, not_before: datetime, not_after: datetime
) -> tuple[Portal, Scope, Scope]:
    """The site's chain head as the store holds it published 15 minutes after the scope (the
    anchor that closes a bundle of its last minutes), the store closed; then the portal, the
    inspector ida scoped to [not_before, not_after) and the Town's bob."""
    seq, head = queries.chain_head(store.conn, SITE)
    with store.batch():
        store.record_anchor(SITE, seq, head, not_after + timedelta(minutes=15))
    store.close()
    portal = Portal(config, clock=lambda: NOW)
    scoped = Scope(User("ida", "inspector", (), not_before, not_after), config)
    town = Scope(User("bob", "town", ()), config)
    return portal, scoped, town
