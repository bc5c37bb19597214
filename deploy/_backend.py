"""What each server `inferwatch doctor` is given is, and which of its questions it can answer.

A Prometheus does it all: it stores and answers queries, scrapes, evaluates the rules and sends the alerts. A
VictoriaMetrics stack splits that: `victoria-metrics` stores and answers queries (and scrapes only when started with
-promscrape.config), `vmagent` scrapes, `vmalert` evaluates the rules and notifies. Doctor asks each question of the
server that can answer it, and names every question no server given can answer, with the flag that would.

What a server is comes from its own answers, never from the flag it was given under. `/api/v1/status/buildinfo`
is asked first: a Prometheus answers it with its version, victoria-metrics with an empty (or a made-up) one, vmagent
and vmalert with 400. `/-/healthy` then says "VictoriaMetrics is Healthy." for every VictoriaMetrics component
(Prometheus: "Prometheus Server is Healthy.", in agent mode "Prometheus Agent is Healthy."), and each component
answers 400 "unsupported path" for the APIs it does not serve. Whatever answers buildinfo and is neither is taken
as a Prometheus (Thanos and Mimir queriers among them).
"""

from __future__ import annotations

from dataclasses import dataclass

from inferwatch.promapi import ApiError, Client

__all__ = ["QUERY", "SCRAPE", "RULES", "ROLE_FLAGS", "Server", "detect"]

QUERY, SCRAPE, RULES = "query", "scrape", "rules"

# role -> (the flag that names a server for it, what such a server is)
ROLE_FLAGS = {
    QUERY: ("--prometheus", "the store the scrapers write to: victoria-metrics or a Prometheus"),
    SCRAPE: ("--scraper", "the vmagent or Prometheus agent that scrapes the engines"),
    RULES: ("--ruler", "the vmalert (or Prometheus) that evaluates the rules and sends the alerts"),
}

# kind -> (name as printed, what it does at most); victoria-metrics scrapes only when it lists targets
_KINDS = {
    "prometheus": ("Prometheus", frozenset({QUERY, SCRAPE, RULES})),
    "prometheus-agent": ("Prometheus agent", frozenset({SCRAPE})),
    "victoriametrics": ("VictoriaMetrics single node", frozenset({QUERY, SCRAPE})),
    "vmagent": ("vmagent", frozenset({SCRAPE})),
    "vmalert": ("vmalert", frozenset({RULES})),
}

# the VictoriaMetrics components, told apart by the one API each serves: (kind, path, shape, params)
_VM_PROBES: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("victoriametrics", "/api/v1/query", "any", {"query": "vector(1)"}),
    ("vmagent", "/api/v1/targets", "targets", {"state": "active"}),
    ("vmalert", "/api/v1/rules", "rules", {}),
)

_ROLE_WORDS = {QUERY: "queries", SCRAPE: "scrape targets", RULES: "rules and alerts"}


@dataclass(frozen=True)
class Server:
    """One server given to doctor: the flag that named it, what it is and what it answers."""

    flag: str
    kind: str
    client: Client
    roles: frozenset[str]
    version: str = ""

    @property
    def name(self) -> str:
        return _KINDS[self.kind][0]

    @property
    def short(self) -> str:
        """How check names call it: `Prometheus`, `VictoriaMetrics`, `vmagent`, `vmalert`."""
        return self.name.split()[0]

    def describe(self) -> str:
        """`VictoriaMetrics single node at URL: queries (it scrapes nothing itself; no rules)`."""
        does = ", ".join(_ROLE_WORDS[r] for r in (QUERY, SCRAPE, RULES) if r in self.roles)
        lacks = [
            what
            for role, what in (
                (SCRAPE, "it scrapes nothing itself"),
                (RULES, "it evaluates no rules"),
                (QUERY, "it stores nothing and answers no queries"),
            )
            if role not in self.roles
        ]
        version = f" {self.version}" if self.version else ""
        return f"{self.name}{version} at {self.client.base}: {does}" + (f" ({'; '.join(lacks)})" if lacks else "")


def detect(client: Client, flag: str) -> Server:
    """What answers at `client`'s URL; ApiError (buildinfo's, as before there was detection) when nothing there
    reads as Prometheus or VictoriaMetrics."""
    try:
        info = client.api("/api/v1/status/buildinfo", "buildinfo")
    except ApiError as err:
        if err.status != 400 or _VM not in _health(client):
            raise
        info = None  # vmagent and vmalert serve no buildinfo
    health = _health(client) if info is not None else _VM
    if _VM not in health:
        kind = "prometheus-agent" if "Prometheus Agent" in health else "prometheus"
        version = info.get("version") if isinstance(info.get("version"), str) else ""
        return Server(flag, kind, client, _KINDS[kind][1], version[:40])
    for kind, path, shape, params in _VM_PROBES:
        try:
            client.api(path, shape, **params)
        except ApiError as err:
            if err.status == 400:  # "unsupported path requested": not this component
                continue
            raise
        roles = _KINDS[kind][1]
        if kind == "victoriametrics" and not client.api("/api/v1/targets", "targets", state="active")["activeTargets"]:
            roles = roles - {SCRAPE}  # no -promscrape.config: a vmagent (or Prometheus agent) scrapes
        return Server(flag, kind, client, roles)
    raise ApiError(
        client.base,
        "a VictoriaMetrics component that serves no query API, target list or rules (vminsert, vmauth, vmstorage?)",
        hint=f"give {flag} victoria-metrics', vmagent's or vmalert's URL",
    )


_VM = "VictoriaMetrics"


def _health(client: Client) -> str:
    """The first line of /-/healthy ("VictoriaMetrics is Healthy.", "Prometheus Agent is Healthy."), or "" when
    it does not answer; asked on a client of its own, so a server that answers it late (or not at all) does not
    stop the checks' calls."""
    try:
        return Client(client.base, client.options, client.name).text("/-/healthy")[:200]
    except ApiError:
        return ""
