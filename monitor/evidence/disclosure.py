"""What an evidence bundle discloses: the configuration by allow-list, records by reader and window.

A bundle leaves the operator's machine (an inspector downloads it, a court reads it), so what it
shows in clear is decided here, field by field and kind by kind, never by what to leave out:

- the configuration: ``monitor.journal.config_record.site_config_text``, the text the daemon
  chains at start-up (an allow-list of the exported site's settings), so verify proves it.
- ``Disclosure``: the records a reader may see (their kinds, the alerts' audiences); a record
  outside the exported window or not for the reader is carried in ``chain.csv`` as its digest
  alone, so the chain still recomputes from anchor to anchor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from monitor.evidence.format import RECORD_KINDS

# Every audience an alert may have but the operator's own: what the Town and its inspectors see
# (the portal's inspector and Town pages show alerts addressed to the town).
READER_AUDIENCES = frozenset({"town", "inspector"})


@dataclass(frozen=True, slots=True)
class Disclosure:
    """The records a bundle shows in clear, inside its window: the reader's view.

    ``kinds``: record kinds (``monitor.evidence.format.RECORD_KINDS``) the reader may see;
    ``audiences``: an alert is shown when one of its audiences is among these. Everything else
    in the chain segment, and every record outside the window, is carried as its digest alone.
    The default is the Town's and its inspectors' view (``minewatch evidence``, the portal).
    """

    kinds: frozenset[str] = frozenset(RECORD_KINDS)
    audiences: frozenset[str] = READER_AUDIENCES

    def manifest(self) -> dict[str, Any]:
        return {"kinds": sorted(self.kinds), "alert_audiences": sorted(self.audiences)}


TOWN_VIEW = Disclosure()
