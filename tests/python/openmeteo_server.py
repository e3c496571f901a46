"""A local stand-in for Open-Meteo's geocoding and forecast APIs, plus the
endpoints the network tests need (redirects, large and slow bodies, an
echo). Standard library only; bound to 127.0.0.1 on an ephemeral port;
served from a background thread.

    with OpenMeteoServer() as api:
        api.url            # "http://127.0.0.1:PORT"
        api.authority      # "127.0.0.1:PORT", the entry to grant
        ...                # point the tool at it, call it
        api.requests       # what it was asked, in order
        api.paths()        # just the paths, e.g. ["/v1/search", "/v1/forecast"]

Or as a pytest fixture: `from openmeteo_server import openmeteo` in a test
module, then take `openmeteo` as an argument (a fresh server per test).

Routes (any method unless noted):

/v1/search?name=&count=&language=&format=&countryCode=
    Open-Meteo's geocoding result shape for the cities in `CITIES`
    (case-insensitive name, optional country filter); `results` is left
    out when nothing matches, as Open-Meteo does. A missing `name` is a
    400 with Open-Meteo's `{"error": true, "reason": ...}`.
/v1/forecast?latitude=&longitude=&daily=&timezone=&start_date=&end_date=
    Daily values from `expected_day(date)` for every day from start to end,
    for the variables asked for in `daily`; `timezone=auto` resolves to the
    nearest known city's zone. Bad or reversed dates, dates outside
    `forecast_range` (when set), unknown variables and missing coordinates
    are 400s with Open-Meteo's error shape.
/redirect?to=URL[&status=302][&hops=1]
    A redirect (302 unless `status` says 301, 303, 307 or 308) to URL
    (default `/echo`); with `hops=N`, N redirects in a row (back to
    /redirect with one hop fewer each time), the last one to URL.
/huge?bytes=N[&length=0]
    N bytes of `x`, streamed in 64 KiB pieces, with `Content-Length`
    unless `length=0` (then chunked).
/slow?ms=N[&after=headers]
    Waits N ms before answering; with `after=headers` it sends the status
    and headers first, then waits, then the body (a stalled body).
/echo
    `{"method", "path", "query", "headers", "body_length"}` of the request.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest


@dataclass(frozen=True)
class City:
    name: str
    country_code: str
    country: str
    admin1: str
    latitude: float
    longitude: float
    timezone: str
    population: int
    id: int


CITIES = [
    City("Berlin", "DE", "Germany", "Land Berlin", 52.52437, 13.41053, "Europe/Berlin", 3426354, 2950159),
    City("Paris", "FR", "France", "Île-de-France", 48.85341, 2.3488, "Europe/Paris", 2138551, 2988507),
    City("Paris", "US", "United States", "Texas", 33.66094, -95.55551, "America/Chicago", 24782, 4717560),
    City("São Paulo", "BR", "Brazil", "São Paulo", -23.5475, -46.63611, "America/Sao_Paulo", 10021295, 3448439),
    City("Malé", "MV", "Maldives", "Malé", 4.17521, 73.50916, "Indian/Maldives", 103693, 1282027),
]

FORECAST_VARIABLES = {
    "temperature_2m_max": "°C",
    "temperature_2m_min": "°C",
    "precipitation_probability_max": "%",
    "wind_speed_10m_max": "km/h",
}


def expected_day(day: str | date) -> dict:
    """The values the fixture serves for one day (the same for every
    place), so tests can compute what the tool must return."""
    d = date.fromisoformat(day) if isinstance(day, str) else day
    n = d.toordinal()
    high = 10.0 + n % 10 + 0.5
    return {
        "temperature_2m_max": high,
        "temperature_2m_min": round(high - 8.25, 2),
        "precipitation_probability_max": (n * 7) % 101,
        "wind_speed_10m_max": 5.0 + (n % 20) * 1.5,
    }


@dataclass(frozen=True)
class Request:
    """One request the fixture got."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lowercase names; the last value wins
    body_length: int


class OpenMeteoServer:
    """The fixture server. `forecast_range=(first, last)` makes dates
    outside it a 400, as Open-Meteo answers dates it has no data for."""

    def __init__(self, forecast_range: tuple[date, date] | None = None):
        self.forecast_range = forecast_range
        self._requests: list[Request] = []
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self.port: int = self._httpd.server_address[1]
        self.authority = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.authority}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openmeteo-fixture", daemon=True)
        self._thread.start()

    def __enter__(self) -> OpenMeteoServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[Request]:
        """Wait until at least `count` requests arrived (or fail)."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while len(self._requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"expected {count} requests, got {self._requests!r}")
                self._arrived.wait(left)
            return list(self._requests)

    def _record(self, request: Request) -> None:
        with self._arrived:
            self._requests.append(request)
            self._arrived.notify_all()


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that hangs up (a cap hit, a timeout) is what the network
        # tests provoke; anything else is a fixture bug worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _handler_for(server: OpenMeteoServer):
    class Handler(_Handler):
        fixture = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    fixture: OpenMeteoServer
    protocol_version = "HTTP/1.1"
    server_version = "openmeteo-fixture/1"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # keep pytest output clean

    def do_GET(self):
        self._serve()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _serve(self):
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        self.fixture._record(
            Request(
                method=self.command,
                path=parts.path,
                query=query,
                headers={k.lower(): v for k, v in self.headers.items()},
                body_length=len(body),
            )
        )
        route = {
            "/v1/search": self._search,
            "/v1/forecast": self._forecast,
            "/redirect": self._redirect,
            "/huge": self._huge,
            "/slow": self._slow,
            "/echo": self._echo,
        }.get(parts.path)
        if route is None:
            self._json(404, {"error": True, "reason": f"Not found: {parts.path}"})
            return
        try:
            route(query, parts, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a cap or a timeout): expected in tests
        except ValueError as error:  # a malformed parameter, before any reply
            self._json(400, {"error": True, "reason": f"Invalid parameter: {error}"})

    # --- Open-Meteo -------------------------------------------------------

    def _search(self, query, _parts, _body):
        name = query.get("name", "").strip()
        if not name:
            self._json(400, {"error": True, "reason": "Parameter 'name' is required"})
            return
        country = query.get("countryCode", "").upper()
        count = int(query.get("count") or 10)
        found = [
            c
            for c in CITIES
            if c.name.casefold() == name.casefold() and (not country or c.country_code == country)
        ]
        found.sort(key=lambda c: -c.population)
        result = {"generationtime_ms": 0.4}
        if found:
            result["results"] = [
                {
                    "id": c.id,
                    "name": c.name,
                    "latitude": c.latitude,
                    "longitude": c.longitude,
                    "elevation": 40.0,
                    "feature_code": "PPLC",
                    "country_code": c.country_code,
                    "timezone": c.timezone,
                    "population": c.population,
                    "country": c.country,
                    "admin1": c.admin1,
                }
                for c in found[:count]
            ]
        self._json(200, result)

    def _forecast(self, query, _parts, _body):
        def fail(reason):
            self._json(400, {"error": True, "reason": reason})

        try:
            latitude = float(query["latitude"])
            longitude = float(query["longitude"])
        except (KeyError, ValueError):
            fail("Parameter 'latitude' and 'longitude' must have the same number of elements")
            return
        variables = [v for v in query.get("daily", "").split(",") if v]
        for v in variables:
            if v not in FORECAST_VARIABLES:
                fail(f"Data corrupted at path ''. Cannot initialize ForecastVariableDaily from invalid String value {v}.")
                return
        try:
            start = date.fromisoformat(query["start_date"])
            end = date.fromisoformat(query["end_date"])
        except (KeyError, ValueError):
            fail("Invalid date format. Make sure to use 'YYYY-MM-DD'")
            return
        if end < start:
            fail("End-date must be larger or equals than start-date")
            return
        if self.fixture.forecast_range is not None:
            first, last = self.fixture.forecast_range
            for name, value in (("start_date", start), ("end_date", end)):
                if not first <= value <= last:
                    fail(f"Parameter '{name}' is out of allowed range from {first} to {last}")
                    return
        timezone = query.get("timezone", "GMT")
        if timezone == "auto":
            nearest = min(CITIES, key=lambda c: (c.latitude - latitude) ** 2 + (c.longitude - longitude) ** 2)
            timezone = nearest.timezone
        days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
        daily = {"time": [d.isoformat() for d in days]}
        for v in variables:
            daily[v] = [expected_day(d)[v] for d in days]
        self._json(
            200,
            {
                "latitude": round(latitude, 2),
                "longitude": round(longitude, 2),
                "generationtime_ms": 0.1,
                "utc_offset_seconds": 0,
                "timezone": timezone,
                "timezone_abbreviation": "GMT",
                "elevation": 40.0,
                "daily_units": {"time": "iso8601", **{v: FORECAST_VARIABLES[v] for v in variables}},
                "daily": daily,
            },
        )

    # --- test endpoints ---------------------------------------------------

    def _redirect(self, query, _parts, _body):
        status = int(query.get("status") or 302)
        hops = int(query.get("hops") or 1)
        target = query.get("to", "/echo")
        if hops > 1:
            # Back here with one hop fewer, then to the target.
            target = "/redirect?" + urlencode({**query, "hops": hops - 1})
        self.send_response(status)
        self.send_header("Location", target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _huge(self, query, _parts, _body):
        size = int(query.get("bytes") or 0)
        with_length = query.get("length", "1") != "0"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if with_length:
            self.send_header("Content-Length", str(size))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return
        piece = b"x" * 65536
        left = size
        while left > 0:
            chunk = piece[: min(left, len(piece))]
            if with_length:
                self.wfile.write(chunk)
            else:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            left -= len(chunk)
        if not with_length:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _slow(self, query, _parts, _body):
        ms = int(query.get("ms") or 0)
        body = json.dumps({"slept_ms": ms}).encode()
        if query.get("after") == "headers":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.flush()
            time.sleep(ms / 1000)
            self.wfile.write(body)
            return
        time.sleep(ms / 1000)
        self._send(200, body, "application/json")

    def _echo(self, query, parts, body):
        self._json(
            200,
            {
                "method": self.command,
                "path": parts.path,
                "query": query,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body_length": len(body),
            },
        )

    # --- helpers ----------------------------------------------------------

    def _json(self, status: int, value) -> None:
        self._send(status, json.dumps(value).encode(), "application/json; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@pytest.fixture
def openmeteo():
    """A fresh fixture server for one test."""
    with OpenMeteoServer() as server:
        yield server
