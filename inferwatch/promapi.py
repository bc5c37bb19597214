"""One client for Prometheus-like HTTP APIs (Prometheus, VictoriaMetrics, Alertmanager, Grafana), shared by triage,
doctor and canary.

Every call is bounded whatever the server does: one total deadline per call (connect, headers and body; a body
trickled byte by byte is cut at the deadline, not per read), a cap on the body after decompression (a small gzip
answer that inflates without end is refused as soon as it passes the cap), JSON nested too deep refused, and every
answer checked against the shape the caller reads (`SHAPES`) before use. Anything wrong is one `ApiError` naming
the endpoint and what was wrong; nothing else escapes.

Auth (headers, bearer token or token file, basic auth), TLS (CA file, insecure, client certificate) and proxies
(the environment's, or one given) are one `ClientOptions`, built from the same flags on every command
(`inferwatch.promapi_flags`, written once there).
"""

from __future__ import annotations

import base64
import json
import math
import socket
import threading
import time
import urllib.parse
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from inferwatch.errors import InferwatchError

if TYPE_CHECKING:  # ssl and http.client load on the first call, not with the CLI
    import http.client
    import ssl

__all__ = ["ApiError", "Client", "ClientOptions", "SHAPES", "check_shape", "DEFAULT_TIMEOUT", "DEFAULT_MAX_BYTES"]

DEFAULT_TIMEOUT = 30.0  # seconds per call, all of it
DEFAULT_MAX_BYTES = 128 * 1024 * 1024  # of the answers read at once, decompressed; triage's are a few MB each
MAX_REDIRECTS = 5
_READ = 64 * 1024


class ApiError(InferwatchError):
    """A call to a Prometheus-like API failed: `endpoint` (URL without the query) and what was wrong.

    `status` is the HTTP status when the server answered one, else None."""

    def __init__(self, endpoint: str, what: str, status: int | None = None, hint: str = ""):
        self.endpoint, self.what, self.status, self.hint = endpoint, what, status, hint
        super().__init__(f"{endpoint}: {what}" + (f"; {hint}" if hint else ""))


@dataclass(frozen=True)
class ClientOptions:
    """How to reach a server: extra headers, auth, TLS, proxy and the bounds of each call."""

    headers: tuple[tuple[str, str], ...] = ()
    bearer_token: str | None = None
    basic_auth: tuple[str, str] | None = None  # (user, password)
    ca_file: str | None = None
    insecure: bool = False  # skip verifying the server's certificate
    cert: str | None = None  # client certificate (PEM), with `key` or containing it
    key: str | None = None
    proxy: str | None = None  # None: HTTP(S)_PROXY / NO_PROXY from the environment
    timeout: float = DEFAULT_TIMEOUT
    max_bytes: int = DEFAULT_MAX_BYTES  # of the answers one Client holds at once, all calls together

    def request_headers(self) -> dict[str, str]:
        out = {"Accept": "application/json", "Accept-Encoding": "gzip", "User-Agent": "inferwatch"}
        if self.bearer_token is not None:
            out["Authorization"] = f"Bearer {self.bearer_token}"
        elif self.basic_auth is not None:
            out["Authorization"] = "Basic " + base64.b64encode(":".join(self.basic_auth).encode()).decode()
        out.update(self.headers)
        return out

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of these options; ApiError-free: an unreadable file is an InferwatchError naming it."""
        import ssl

        try:
            context = ssl.create_default_context(cafile=self.ca_file)
            if self.insecure:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self.cert:
                context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as err:
            which = f"--ca-file {self.ca_file}" if self.ca_file else f"--cert {self.cert}"
            raise InferwatchError(f"{which}: cannot load: {getattr(err, 'strerror', None) or err}") from None
        return context


# ---- answer shapes: a type, {key: shape} (keys required, others ignored), [shape] (a list of), or a tuple of
# alternatives; `str_map` is a {str: str} object, `num` a number, `sample` a [time, "value"] pair.
_STR_MAP, _NUM, _SAMPLE, _ANY = "str_map", "num", "sample", "any"

SHAPES: dict[str, Any] = {
    "envelope": {"status": str, "data": _ANY},
    "any": _ANY,
    "vector": [{"metric": _STR_MAP, "value": _SAMPLE}],
    "matrix": [{"metric": _STR_MAP, "values": [_SAMPLE]}],
    "buildinfo": dict,
    "targets": {"activeTargets": [{"labels": _STR_MAP, "scrapeUrl": str, "health": str, "lastError": str}]},
    "config": {"yaml": str},
    "rules": {"groups": [{"name": str, "rules": [dict]}]},
    "alertmanagers": {"activeAlertmanagers": list},
    "am_status": {"config": {"original": str}},
    "grafana_search": [dict],
}


def _is_sample(value) -> bool:
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], str)):
        return False
    t = value[0]
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
        return False
    try:
        float(value[1])
    except ValueError:
        return False
    return True


def check_shape(value, shape, where: str = "answer") -> str | None:
    """None when `value` has `shape`, else where it does not, e.g. `data.result[3].metric: got null`."""
    if shape == _ANY:
        return None
    if shape == _NUM:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else f"{where}: want a number, got {_kind(value)}"
    if shape == _SAMPLE:
        return None if _is_sample(value) else f'{where}: want [time, "value"], got {_short(value)}'
    if shape == _STR_MAP:
        ok = isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
        return None if ok else f"{where}: want an object of strings, got {_short(value)}"
    if isinstance(shape, type):
        return (
            None
            if isinstance(value, shape) and not isinstance(value, bool)
            else f"{where}: want {_TYPE_NAMES.get(shape, shape.__name__)}, got {_kind(value)}"
        )
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{where}: want a list, got {_kind(value)}"
        for i, item in enumerate(value):
            if (wrong := check_shape(item, shape[0], f"{where}[{i}]")) is not None:
                return wrong
        return None
    if not isinstance(value, dict):
        return f"{where}: want an object, got {_kind(value)}"
    for key, inner in shape.items():
        if key not in value:
            return f"{where}: no {key!r}"
        if (wrong := check_shape(value[key], inner, f"{where}.{key}")) is not None:
            return wrong
    return None


_TYPE_NAMES = {str: "a string", dict: "an object", list: "a list", int: "an integer", float: "a number"}


def _kind(value) -> str:
    return {
        type(None): "null",
        bool: "a boolean",
        str: "a string",
        dict: "an object",
        list: "a list",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _short(value) -> str:
    text = json.dumps(value)[:60] if not isinstance(value, (dict, list)) or len(str(value)) < 60 else _kind(value)
    return text


def _printable(data: bytes, limit: int = 100) -> str:
    text = data[: limit * 4].decode("utf-8", "replace")
    text = " ".join(text.split())
    return "".join(c if c.isprintable() else "?" for c in text)[:limit]


class _Deadline:
    """The time left of one call; every socket operation waits at most that long."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


class Client:
    """Calls against one server's base URL (`http://prometheus:9090`, or one with a path prefix)."""

    def __init__(self, base: str, options: ClientOptions | None = None, name: str = "Prometheus"):
        self.base = base.rstrip("/")
        self.options = options or ClientOptions()
        self.name = name
        self._context: ssl.SSLContext | None = None
        self._late: ApiError | None = None  # a call ran out of time: the next ones fail at once, not each late
        self._held = 0  # bytes of the answers being read now, all calls together
        self._lock = threading.Lock()

    # -- Prometheus' HTTP API --------------------------------------------------------------------------------
    def api(self, path: str, shape: str, **params) -> Any:
        """The `data` of a Prometheus API answer (`{"status": "success", "data": ...}`), checked against
        SHAPES[shape]."""
        answer = self.get(path, **params)
        endpoint = self.base + path
        if (wrong := check_shape(answer, SHAPES["envelope"])) is not None:
            raise ApiError(endpoint, f"not a Prometheus API answer ({wrong})", hint=f"check the {self.name} URL")
        if answer["status"] != "success":
            error = _printable(str(answer.get("error", "")).encode())
            raise ApiError(endpoint, f"status {_printable(answer['status'].encode(), 30)!r}: {error}")
        if (wrong := check_shape(answer["data"], SHAPES[shape], "data")) is not None:
            raise ApiError(endpoint, f"answer of the wrong shape ({wrong})")
        return answer["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        """An instant query's series: a vector (`value`), or a matrix (`values`) for a range selector; a scalar
        answer reads as one series without labels."""
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        return self._result("/api/v1/query", ("vector", "matrix", "scalar"), params)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict]:
        """A range query's series, each `{"metric": {...}, "values": [[t, "v"], ...]}`."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        return self._result("/api/v1/query_range", ("matrix",), params)

    def _result(self, path: str, kinds: tuple[str, ...], params: dict) -> list[dict]:
        data = self.api(path, "any", **params)
        endpoint = self.base + path
        if not isinstance(data, dict) or not isinstance(data.get("resultType"), str) or "result" not in data:
            raise ApiError(
                endpoint, f"answer of the wrong shape (data: want resultType and result, got {_short(data)})"
            )
        kind, result = data["resultType"], data["result"]
        if kind not in kinds:
            raise ApiError(endpoint, f"resultType {_printable(kind.encode(), 30)!r}, want {' or '.join(kinds)}")
        if kind == "scalar":
            if not _is_sample(result):
                raise ApiError(
                    endpoint, f'answer of the wrong shape (data.result: want [time, "value"], got {_short(result)})'
                )
            return [{"metric": {}, "value": result}]
        if (wrong := check_shape(result, SHAPES[kind], "data.result")) is not None:
            raise ApiError(endpoint, f"answer of the wrong shape ({wrong})")
        return result

    # -- any JSON GET ------------------------------------------------------------------------------------------
    def get(self, path: str, shape: str | None = None, **params) -> Any:
        """GET base+path as JSON within the deadline and size cap; checked against SHAPES[shape] when given."""
        endpoint = self.base + path
        body, status, ctype = self._body(path, params)
        try:
            answer = json.loads(body.decode("utf-8"))
        except RecursionError:
            raise ApiError(endpoint, "JSON nested too deep") from None
        except (UnicodeDecodeError, ValueError) as err:
            what = "an empty body" if not body.strip() else f"{ctype or 'no content type'}, not JSON"
            raise ApiError(
                endpoint,
                f"answered {what} ({_printable(str(err).encode(), 60)}): {_printable(body, 60)!r}",
                status,
                f"check the {self.name} URL",
            ) from None
        if shape is not None and (wrong := check_shape(answer, SHAPES[shape])) is not None:
            raise ApiError(endpoint, f"answer of the wrong shape ({wrong})", status)
        return answer

    def text(self, path: str, **params) -> str:
        """GET base+path as text (a health page, a /metrics exposition), within the same deadline and size cap."""
        body, _, _ = self._body(path, params)
        return body.decode("utf-8", "replace")

    def _body(self, path: str, params: dict) -> tuple[bytes, int, str]:
        """(body, status, content type) of a GET that answered below 400; ApiError otherwise."""
        endpoint = self.base + path
        url = endpoint + ("?" + urllib.parse.urlencode(params) if params else "")
        if self._late is not None:
            raise ApiError(
                endpoint,
                f"not asked: {self._late.endpoint} gave no complete answer within the "
                f"{self.options.timeout:g}s deadline",
                hint=self._late.hint,
            )
        deadline = _Deadline(self.options.timeout)
        try:
            body, status, ctype = self._fetch(url, endpoint, deadline)
        except ApiError as err:
            if deadline.left() <= 0:
                self._late = err
            raise
        if status >= 400:
            raise ApiError(endpoint, self._error_text(status, ctype, body), status, self._hint(status))
        return body, status, ctype

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            return "pass credentials: --bearer-token-file FILE, --basic-auth USER:PASSWORD or --header"
        if status == 404:
            return f"check the {self.name} URL (and its path prefix)"
        return ""

    @staticmethod
    def _error_text(status: int, ctype: str, body: bytes) -> str:
        try:
            answer = json.loads(body.decode("utf-8"))
        except (RecursionError, UnicodeDecodeError, ValueError):
            answer = None
        if isinstance(answer, dict) and isinstance(answer.get("error"), str):
            return f"HTTP {status}: {_printable(answer['error'].encode(), 300)}"
        if isinstance(answer, dict) and isinstance(answer.get("message"), str):  # Grafana
            return f"HTTP {status}: {_printable(answer['message'].encode(), 300)}"
        return f"HTTP {status} ({ctype or 'no content type'}): {_printable(body, 100)!r}"

    # -- transport ---------------------------------------------------------------------------------------------
    def _fetch(self, url: str, endpoint: str, deadline: _Deadline) -> tuple[bytes, int, str]:
        seen = []
        for _ in range(MAX_REDIRECTS + 1):
            seen.append(url)
            status, headers, body = self._once(url, endpoint, deadline)
            if status in (301, 302, 303, 307, 308) and headers.get("location"):
                url = urllib.parse.urljoin(url, headers["location"])
                if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
                    raise ApiError(endpoint, f"redirected to {_printable(url.encode())!r}, not http(s)", status)
                continue
            return body, status, headers.get("content-type", "")
        raise ApiError(
            endpoint,
            f"redirected more than {MAX_REDIRECTS} times (last to {_printable(url.encode())})",
            hint=f"check the {self.name} URL",
        )

    def _once(self, url: str, endpoint: str, deadline: _Deadline):
        import http.client
        import ssl

        parts = urllib.parse.urlsplit(url)
        conn = self._connection(parts, endpoint, deadline)
        sock = None
        watchdog = None
        try:
            try:
                conn.connect()
                sock = conn.sock
                watchdog = threading.Timer(max(0.0, deadline.left()), _shut, (sock,))
                watchdog.daemon = True
                watchdog.start()
                target = (
                    url
                    if self._via_plain_proxy(parts)
                    else (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                )
                conn.request("GET", target, headers=self.options.request_headers())
                resp = conn.getresponse()
                headers = {k.lower(): v for k, v in resp.getheaders()}
                body = self._read(resp, headers, endpoint, deadline)
            except ApiError:
                raise
            except http.client.IncompleteRead:
                if deadline.left() <= 0:
                    raise ApiError(
                        endpoint,
                        f"no complete answer within the {self.options.timeout:g}s deadline",
                        hint="raise --timeout if the server is slow but alive",
                    ) from None
                raise ApiError(endpoint, "a truncated body (it ends before its length)") from None
            except ssl.SSLError as err:
                raise ApiError(
                    endpoint, f"TLS failed ({_printable(str(err).encode(), 150)})", hint="give --ca-file, or --insecure"
                ) from None
            except (OSError, http.client.HTTPException, ValueError) as err:
                if deadline.left() <= 0:
                    raise ApiError(
                        endpoint,
                        f"no complete answer within the {self.options.timeout:g}s deadline",
                        hint="raise --timeout if the server is slow but alive",
                    ) from None
                raise ApiError(
                    endpoint,
                    f"cannot reach {self.name}: {_printable(str(err).encode(), 150) or type(err).__name__}",
                    hint=f"check the {self.name} URL",
                ) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            conn.close()
        return resp.status, headers, body

    def _via_plain_proxy(self, parts) -> bool:
        return parts.scheme == "http" and self._proxy_for(parts) is not None

    def _proxy_for(self, parts) -> urllib.parse.SplitResult | None:
        import urllib.request

        if self.options.proxy is not None:
            return urllib.parse.urlsplit(self.options.proxy) if self.options.proxy else None
        if urllib.request.proxy_bypass(parts.hostname or ""):
            return None
        found = urllib.request.getproxies().get(parts.scheme)
        return urllib.parse.urlsplit(found if "://" in found else "http://" + found) if found else None

    def _connection(self, parts, endpoint: str, deadline: _Deadline) -> http.client.HTTPConnection:
        import http.client

        timeout = max(0.001, deadline.left())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiError(endpoint, "not an http(s) URL")
        proxy = self._proxy_for(parts)
        if proxy:
            if not proxy.hostname:  # http.client would fail on a None host with a TypeError
                raise ApiError(endpoint, f"the proxy {proxy.geturl()} has no host", hint="give it as http://HOST:PORT")
            host, port = proxy.hostname, proxy.port or 80
        else:
            host, port = parts.hostname, parts.port
        if parts.scheme == "https":
            if self._context is None:
                self._context = self.options.ssl_context()
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=timeout, context=self._context
            )
            if proxy:
                conn.set_tunnel(parts.hostname, parts.port, headers=_proxy_auth(proxy))
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        return conn

    def _read(self, resp, headers: dict, endpoint: str, deadline: _Deadline) -> bytes:
        """The whole body, decompressed, within the deadline and the size cap."""
        cap = self.options.max_bytes
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("identity", "", "gzip", "x-gzip", "deflate"):
            raise ApiError(
                endpoint,
                f"answered in content encoding {_printable(encoding.encode(), 30)!r}, which inferwatch does not read",
            )
        inflater = _Inflater() if encoding not in ("identity", "") else None
        body = bytearray()
        size = 0
        try:
            for piece in _pieces(resp, inflater):
                if deadline.left() <= 0:
                    raise ApiError(
                        endpoint,
                        f"no complete answer within the {self.options.timeout:g}s deadline",
                        hint="raise --timeout if the server is slow but alive",
                    )
                with self._lock:
                    self._held += len(piece)
                    over = self._held > cap
                size += len(piece)
                if over:
                    what = (
                        f"answer larger than {cap} bytes"
                        if size > cap
                        else f"answers read at once larger than {cap} bytes (this one {size} so far)"
                    )
                    raise ApiError(
                        endpoint,
                        what + (" once decompressed" if inflater else ""),
                        hint="raise --max-bytes, or ask for a shorter window",
                    )
                body += piece
        except zlib.error as err:
            body.clear()
            raise ApiError(endpoint, f"a corrupt {encoding} body ({err})") from None
        except BaseException:
            body.clear()  # a traceback kept by the caller (a future's) must not keep the body alive
            raise
        finally:
            with self._lock:
                self._held -= size
        if deadline.left() <= 0:
            raise ApiError(
                endpoint,
                f"no complete answer within the {self.options.timeout:g}s deadline",
                hint="raise --timeout if the server is slow but alive",
            )
        if resp.length:
            raise ApiError(endpoint, f"a truncated body ({resp.length} of its Content-Length bytes missing)")
        if inflater is not None and not inflater.complete:
            raise ApiError(endpoint, f"a truncated {encoding} body")
        return bytes(body)


class _Inflater:
    """gzip (one member or several, each valid) or zlib's deflate, inflated at most _STEP bytes at a time, so a
    bomb is counted against the cap as it inflates, never inflated whole first."""

    def __init__(self):
        self._z = zlib.decompressobj(47)
        self.complete = True  # no member begun and left unfinished

    def pieces(self, data: bytes):
        while data:
            piece = self._z.decompress(data, _STEP)
            if self._z.eof:
                data = self._z.unused_data
                if data:
                    self._z = zlib.decompressobj(47)
            else:
                data = self._z.unconsumed_tail
            self.complete = self._z.eof
            if piece:
                yield piece


_STEP = 1024 * 1024


def _pieces(resp, inflater: _Inflater | None):
    """The body as it arrives, each read returned at once (`read1`: a trickle never blocks past one read)."""
    while chunk := resp.read1(_READ):
        if inflater is None:
            yield chunk
        else:
            yield from inflater.pieces(chunk)


def _shut(sock) -> None:
    """The deadline passed: wake whatever read or write waits on `sock`."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _proxy_auth(proxy) -> dict[str, str]:
    if proxy.username is None:
        return {}
    user = urllib.parse.unquote(proxy.username) + ":" + urllib.parse.unquote(proxy.password or "")
    return {"Proxy-Authorization": "Basic " + base64.b64encode(user.encode()).decode()}
