"""Site-plan geometry: geographic points (WGS84 latitude, longitude) on a local metric plane.

Pure functions and values (no I/O): the configuration checks its boundary and positions with
them, the portal draws the site plan with them and the complaint check measures a complaint's
distance to each monitor with them, so the three agree on every metre.

The plane is an equirectangular projection about a centre point: x east and y north in metres,
``x = R * dlon * cos(lat0)``, ``y = R * dlat``. Over a quarry's few kilometres its error is the
change of ``cos(lat)`` across the site (about 0.03 % per 100 m of northing at 45 degrees) and
the earth's flattening (under 0.5 %), far below the metres a monitor's position is known to;
no projection library is needed and nothing depends on a UTM zone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

EARTH_RADIUS_M = 6_371_008.8  # the IUGG mean radius
LatLon = tuple[float, float]  # (latitude, longitude) in degrees, WGS84
XY = tuple[float, float]  # (east, north) in metres on a site's plane


@dataclass(frozen=True, slots=True)
class Plane:
    """The local metric plane about ``centre`` (see the module's docstring for why it suffices)."""

    lat0: float
    lon0: float

    @classmethod
    def about(cls, points: Sequence[LatLon]) -> Plane:
        """The plane centred on the middle of the points' bounding box."""
        lats = [p[0] for p in points]
        lons = [p[1] for p in points]
        return cls((min(lats) + max(lats)) / 2, (min(lons) + max(lons)) / 2)

    def xy(self, point: LatLon) -> XY:
        lat, lon = point
        x = math.radians(lon - self.lon0) * EARTH_RADIUS_M * math.cos(math.radians(self.lat0))
        y = math.radians(lat - self.lat0) * EARTH_RADIUS_M
        return (x, y)

    def latlon(self, xy: XY) -> LatLon:
        x, y = xy
        lat = self.lat0 + math.degrees(y / EARTH_RADIUS_M)
        lon = self.lon0 + math.degrees(x / (EARTH_RADIUS_M * math.cos(math.radians(self.lat0))))
        return (lat, lon)


def great_circle_m(a: LatLon, b: LatLon) -> float:
    """The haversine distance in metres (the reference the plane is tested against)."""
    lat1, lon1, lat2, lon2 = map(math.radians, (a[0], a[1], b[0], b[1]))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(math.sqrt(h))


def open_ring(points: Sequence[XY] | Sequence[LatLon]) -> list[tuple[float, float]]:
    """The polygon's vertices without the closing repeat of the first (a ring may be given either way)."""
    ring = [(float(p[0]), float(p[1])) for p in points]
    if len(ring) > 1 and ring[0] == ring[-1]:
        ring.pop()
    return ring


def _cross(o: XY, a: XY, b: XY) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _segments_cross(p1: XY, p2: XY, q1: XY, q2: XY) -> bool:
    """Whether two segments meet (touching counts)."""
    d1, d2 = _cross(q1, q2, p1), _cross(q1, q2, p2)
    d3, d4 = _cross(p1, p2, q1), _cross(p1, p2, q2)
    if ((d1 > 0 and d2 < 0) or (d1 < 0 and d2 > 0)) and ((d3 > 0 and d4 < 0) or (d3 < 0 and d4 > 0)):
        return True

    def on(a: XY, b: XY, c: XY, d: float) -> bool:
        return (
            d == 0
            and min(a[0], b[0]) <= c[0] <= max(a[0], b[0])
            and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])
        )

    return on(q1, q2, p1, d1) or on(q1, q2, p2, d2) or on(p1, p2, q1, d3) or on(p1, p2, q2, d4)


def self_intersection(ring: Sequence[XY]) -> tuple[int, int] | None:
    """The first pair of non-adjacent edges (by index, edge i runs from vertex i to i+1) that
    meet, or None for a simple polygon. ``ring`` is open (no repeated first vertex)."""
    n = len(ring)
    edges = [(ring[i], ring[(i + 1) % n]) for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if j == i + 1 or (i == 0 and j == n - 1):
                continue  # neighbours share a vertex
            if _segments_cross(*edges[i], *edges[j]):
                return (i, j)
    return None


def contains(ring: Sequence[XY], point: XY) -> bool:
    """Whether ``point`` lies inside the (open) ring: the even-odd rule."""
    x, y = point
    inside = False
    n = len(ring)
    for i in range(n):
        (x1, y1), (x2, y2) = ring[i], ring[(i + 1) % n]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def edge_distance(ring: Sequence[XY], point: XY) -> float:
    """The distance in metres from ``point`` to the nearest edge of the ring."""
    best = math.inf
    n = len(ring)
    for i in range(n):
        (x1, y1), (x2, y2) = ring[i], ring[(i + 1) % n]
        dx, dy = x2 - x1, y2 - y1
        length2 = dx * dx + dy * dy
        t = (
            0.0
            if length2 == 0
            else max(0.0, min(1.0, ((point[0] - x1) * dx + (point[1] - y1) * dy) / length2))
        )
        best = min(best, math.hypot(point[0] - (x1 + t * dx), point[1] - (y1 + t * dy)))
    return best
