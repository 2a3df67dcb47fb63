"""Stopping paho's network thread without its race.

paho 2.x's ``loop_stop`` checks ``client._thread``, then joins it; the thread sets that
attribute to None as its last step, which it reaches on its own after a ``disconnect()`` or a
refused login. Ending between the two, it turns the join into ``AttributeError: 'NoneType'
object has no attribute 'join'`` (eclipse-paho/paho.mqtt.python#872, open in 2.2). Every
place that stops a client's loop goes through ``stop_network_loop``.
"""

from __future__ import annotations

import paho.mqtt.client as mqtt


def stop_network_loop(client: mqtt.Client) -> None:
    """``client.loop_stop()``, done when the thread has ended, whichever side ended it."""
    try:
        client.loop_stop()
    except AttributeError:
        # Only the race's own symptom is taken: the reference is gone because the thread
        # cleared it in its `finally`, after which it runs nothing more.
        if getattr(client, "_thread", None) is not None:
            raise
