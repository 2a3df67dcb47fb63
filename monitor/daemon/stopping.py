"""How `minewatch run` is asked to stop: SIGTERM or SIGINT sets its stop, from the start of the
command to its end, and each stage ends at its next safe point.

The daemon's handler was put in as its run began (``pipeline.run``, after the configuration,
the store's check, the site claims and the pipeline's modules, a second or more), and before
that SIGTERM ended the process by the CLI's one-shot rule (exit 143, no log line): a daemon
stopped while it started (systemd's stop, the supervisor stopping its workers) looked crashed.
Light: imported before the pipeline's modules.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger("minewatch.pipeline")


def stop_on_signals(stop: threading.Event, said: logging.Logger = log, doing: str = "shutting down") -> None:
    """SIGTERM and SIGINT set ``stop``, each said in one line (Signal 15: ``doing``)."""

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        said.info("Signal %d: %s", signum, doing)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)


def stopped_while_starting(said: logging.Logger = log) -> int:
    """The end of a run stopped before it took anything from the broker: exit 0, said as a stop
    during the run is (``Stopped``)."""
    said.info(
        "Stopped while starting: nothing was taken from the broker; what it holds for the daemon"
        " waits there for the next start"
    )
    return 0
