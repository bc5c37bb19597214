"""`inferwatch dashboards push`: upload dashboards to Grafana by uid, into a folder, idempotently.

The API token comes from GRAFANA_TOKEN and is never printed, logged or put in
an error message.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from inferwatch.errors import InferwatchError

__all__ = ["push", "TOKEN_ENV"]

TOKEN_ENV = "GRAFANA_TOKEN"


class _Grafana:
    def __init__(self, url: str, token: str, timeout: float = 15):
        self.url, self._token, self.timeout = url.rstrip("/"), token, timeout

    def call(self, method: str, path: str, body: dict | None = None, ok=(200,)):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self._token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            if err.code in ok:
                return err.code, None
            detail = err.read().decode(errors="replace")[:300].replace(self._token, "***")
            hint = " (check GRAFANA_TOKEN: it needs the Editor role)" if err.code in (401, 403) else ""
            raise InferwatchError(f"Grafana {method} {path}: HTTP {err.code}{hint}: {detail}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise InferwatchError(f"cannot reach Grafana at {self.url}: {reason}") from None


def push(dashboards: dict[str, dict], url: str, folder: str = "inferwatch", token: str | None = None) -> list[str]:
    """Create or update each dashboard (by uid) in `folder` (created if missing); returns what was done."""
    token = token if token is not None else os.environ.get(TOKEN_ENV, "")
    if not token:
        raise InferwatchError(f"set {TOKEN_ENV} to a Grafana service-account token with the Editor role")
    grafana = _Grafana(url, token)
    folder_uid = _folder(grafana, folder)
    done = []
    for name, board in dashboards.items():
        body = {
            "dashboard": {**board, "id": None},
            "folderUid": folder_uid,
            "overwrite": True,
            "message": "inferwatch dashboards push",
        }
        _, answer = grafana.call("POST", "/api/dashboards/db", body)
        done.append(
            f"{name}: {board.get('uid')} -> {grafana.url}{(answer or {}).get('url', '')} "
            f"(version {(answer or {}).get('version', '?')})"
        )
    return done


def _folder(grafana: _Grafana, title: str) -> str:
    uid = "inferwatch-" + "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")
    status, found = grafana.call("GET", f"/api/folders/{uid}", ok=(404,))
    if status == 404:
        grafana.call("POST", "/api/folders", {"uid": uid, "title": title})
    return uid
