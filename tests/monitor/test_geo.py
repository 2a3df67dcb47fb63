"""monitor/geo.py: the site's local metric plane against known lengths on the WGS84 ellipsoid,
and the polygon checks the configuration and the plan use."""

from __future__ import annotations

import math

import pytest

from monitor import geo

# The WGS84 ellipsoid: the reference the sphere of geo.py is measured against.
A, F = 6_378_137.0, 1 / 298.257223563
E2 = F * (2 - F)
# The length of one degree at 45 degrees latitude as published (the table "Length of a degree"
# in the Wikipedia articles Latitude and Longitude: 111.132 km and 78.847 km).
DEGREE_OF_LATITUDE_AT_45 = 111_132.0
DEGREE_OF_LONGITUDE_AT_45 = 78_847.0
# The Dovre demo site's north-west and south-east boundary corners (sensors/demo/dovre-demo.toml).
NW, SE = (45.27320, -91.62570), (45.26690, -91.61430)


def degree_lengths(lat: float) -> tuple[float, float]:
    """(north, east) metres of one degree on the ellipsoid: the meridian and parallel radii."""
    phi = math.radians(lat)
    w = math.sqrt(1 - E2 * math.sin(phi) ** 2)
    return (math.pi * A * (1 - E2) / (180 * w**3), math.pi * A * math.cos(phi) / (180 * w))


def vincenty_m(p: geo.LatLon, q: geo.LatLon) -> float:
    """The geodesic distance on the WGS84 ellipsoid (Vincenty's inverse formula, 1975)."""
    b = A * (1 - F)
    u1, u2 = (
        math.atan((1 - F) * math.tan(math.radians(p[0]))),
        math.atan((1 - F) * math.tan(math.radians(q[0]))),
    )
    big_l = math.radians(q[1] - p[1])
    lam = big_l
    for _ in range(200):
        sin_sigma = math.hypot(
            math.cos(u2) * math.sin(lam),
            math.cos(u1) * math.sin(u2) - math.sin(u1) * math.cos(u2) * math.cos(lam),
        )
        cos_sigma = math.sin(u1) * math.sin(u2) + math.cos(u1) * math.cos(u2) * math.cos(lam)
        sigma = math.atan2(sin_sigma, cos_sigma)
        sin_alpha = math.cos(u1) * math.cos(u2) * math.sin(lam) / sin_sigma
        cos2_alpha = 1 - sin_alpha**2
        cos_2sm = cos_sigma - 2 * math.sin(u1) * math.sin(u2) / cos2_alpha
        c = F / 16 * cos2_alpha * (4 + F * (4 - 3 * cos2_alpha))
        previous = lam
        lam = big_l + (1 - c) * F * sin_alpha * (
            sigma + c * sin_sigma * (cos_2sm + c * cos_sigma * (-1 + 2 * cos_2sm**2))
        )
        if abs(lam - previous) < 1e-12:
            break
    u_sq = cos2_alpha * (A**2 - b**2) / b**2
    big_a = 1 + u_sq / 16384 * (4096 + u_sq * (-768 + u_sq * (320 - 175 * u_sq)))
    big_b = u_sq / 1024 * (256 + u_sq * (-128 + u_sq * (74 - 47 * u_sq)))
    delta = (
        big_b
        * sin_sigma
        * (
            cos_2sm
            + big_b
            / 4
            * (
                cos_sigma * (-1 + 2 * cos_2sm**2)
                - big_b / 6 * cos_2sm * (-3 + 4 * sin_sigma**2) * (-3 + 4 * cos_2sm**2)
            )
        )
    )
    return b * big_a * (sigma - delta)


def plane_distance(plane: geo.Plane, a: geo.LatLon, b: geo.LatLon) -> float:
    (x1, y1), (x2, y2) = plane.xy(a), plane.xy(b)
    return float(((x2 - x1) ** 2 + (y2 - y1) ** 2) ** 0.5)


def test_a_degree_on_the_plane_is_the_ellipsoids_within_one_percent() -> None:
    north_45, east_45 = degree_lengths(45.0)
    assert (north_45, east_45) == pytest.approx(
        (DEGREE_OF_LATITUDE_AT_45, DEGREE_OF_LONGITUDE_AT_45), abs=1.0
    )
    plane = geo.Plane(45.0, -91.0)
    north = plane_distance(plane, (44.5, -91.0), (45.5, -91.0))
    east = plane_distance(plane, (45.0, -91.5), (45.0, -90.5))
    assert north == pytest.approx(DEGREE_OF_LATITUDE_AT_45, rel=0.01)
    assert east == pytest.approx(DEGREE_OF_LONGITUDE_AT_45, rel=0.01)
    assert north == pytest.approx(111_194.9, abs=0.5)  # R * pi / 180 with the IUGG mean radius


def test_across_the_demo_site_the_plane_agrees_with_the_geodesic_within_one_percent() -> None:
    plane = geo.Plane.about([NW, SE])
    geodesic = vincenty_m(NW, SE)
    assert geodesic == pytest.approx(1136.0, abs=1.0)  # 700 m south and 894 m east
    assert plane_distance(plane, NW, SE) == pytest.approx(geodesic, rel=0.01)
    assert geo.great_circle_m(NW, SE) == pytest.approx(geodesic, rel=0.01)
    east = vincenty_m((45.27, -91.6257), (45.27, -91.6143))
    assert plane_distance(plane, (45.27, -91.6257), (45.27, -91.6143)) == pytest.approx(east, rel=0.01)
    # The plane and the great circle, both used by minewatch, agree far closer than that.
    assert plane_distance(plane, NW, SE) == pytest.approx(geo.great_circle_m(NW, SE), rel=0.001)


def test_the_plane_is_centred_and_goes_back_to_the_same_point() -> None:
    plane = geo.Plane.about([NW, SE])
    assert plane.xy(((NW[0] + SE[0]) / 2, (NW[1] + SE[1]) / 2)) == pytest.approx((0.0, 0.0), abs=1e-6)
    x, y = plane.xy(NW)
    assert x < 0 < y  # north-west: west is negative x, north positive y
    assert plane.latlon(plane.xy(SE)) == pytest.approx(SE, abs=1e-9)


def test_polygons() -> None:
    square = [(0.0, 0.0), (100.0, 0.0), (100.0, 100.0), (0.0, 100.0)]
    assert geo.open_ring([*square, square[0]]) == square
    assert geo.self_intersection(square) is None
    assert geo.self_intersection([(0.0, 0.0), (100.0, 100.0), (100.0, 0.0), (0.0, 100.0)]) == (0, 2)
    # A vertex touching a non-adjacent edge is a crossing too.
    assert geo.self_intersection([(0.0, 0.0), (100.0, 0.0), (50.0, 0.0), (50.0, 50.0)]) is not None
    assert geo.contains(square, (50.0, 50.0)) and not geo.contains(square, (150.0, 50.0))
    assert geo.edge_distance(square, (50.0, 40.0)) == pytest.approx(40.0)
    assert geo.edge_distance(square, (130.0, 140.0)) == pytest.approx(50.0)  # to the corner
