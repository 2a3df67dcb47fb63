"""How `minewatch run` is asked to stop: SIGTERM or SIGINT sets its stop, from the start of the
command to its end, and each stage ends at its next safe point.

The daemon's handler was put in as its run began (``pipeline.run``, after the configuration,
the store's check, the site claims and the pipeline's modules, a second or more), and before
that SIGTERM ended the process by the CLI's one-shot rule (exit 143, no log line): a daemon
stopped while it started (systemd's stop, the supervisor stopping its workers) looked crashed.
Then it was put in as `run`'s command began, after the command's modules (the configuration's,
some 70 ms), which left the same end to a signal in them; the CLI notes both signals from its
first line (hold_stop_signals), before it loads a command's modules, and the handler takes
those noted as its own. What is left is Python's own start-up and the CLI's module (some 50 ms
from the process's start here, most of it the interpreter's site module), where a SIGTERM has
its default action. Light: the CLI's module imports it (logging, signal, threading).
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger("minewatch.pipeline")


# SIGTERM and SIGINT as they came before run's handler was in (hold_stop_signals), in order.
_HELD: list[int] = []


def hold_stop_signals() -> None:
    """From `minewatch run`'s first line (monitor.cli.main, before the command's modules load):
    SIGTERM and SIGINT are noted, and stop_on_signals takes them once it is in, as if they had
    come then. A run that ends before (a usage error, --help) ends as it would have."""

    def _note(signum: int, frame: FrameType | None) -> None:
        _HELD.append(signum)

    signal.signal(signal.SIGTERM, _note)
    signal.signal(signal.SIGINT, _note)


def stop_on_signals(stop: threading.Event, said: logging.Logger = log, doing: str = "shutting down") -> None:
    """SIGTERM and SIGINT set ``stop``, each said in one line (Signal 15: ``doing``); those that
    came since the CLI's first line (hold_stop_signals) are taken now, each said once."""

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        said.info("Signal %d: %s", signum, doing)
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    held = list(dict.fromkeys(_HELD))
    _HELD.clear()
    for signum in held:
        _on_signal(signum, None)


def stopped_while_starting(said: logging.Logger = log) -> int:
    """The end of a run stopped before it took anything from the broker: exit 0, said as a stop
    during the run is (``Stopped``)."""
    said.info(
        "Stopped while starting: nothing was taken from the broker; what it holds for the daemon"
        " waits there for the next start"
    )
    return 0
