"""Edge publishers and the site simulator.

    sound.py / light.py / i2c.py   sources and pure processing (monitor.acoustics.iec61672 on the edge)
    publisher.py                   records -> monitor.wire.codec payloads (signed with the sensor's key)
    queue.py                       store and forward: SQLite FIFO, bounded, drops reported
    link.py                        the only paho code: QoS 1, delete on PUBACK
    scenario.py / simulate.py      a day at a quarry as data, and the generator that plays it
    scenarios/*.toml               built-in scenarios (README.md there describes the format)

The command shells are monitor/commands/sensor.py and monitor/commands/simulate.py.
"""
