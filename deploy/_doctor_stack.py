"""Which server answers which of doctor's checks, and the checks a split stack needs beside Prometheus' own.

`detect_servers` says what each URL given is (deploy/_backend.py); `assign_roles` picks, per role (queries, scrape
targets, rules and alerts), the server named for it (`--scraper`, `--ruler`) or else the `--prometheus` one when it
can; `skipped` names each check no server given can answer, why, and the flag that would let it run. Without a
scraper's target list, `check_stored_up` reads the `up` series the scraper wrote into the store; vmalert's
notifiers and missed iterations come from its own /metrics (it has no /api/v1/alertmanagers).
"""

from __future__ import annotations

from inferwatch.deploy._backend import QUERY, ROLE_FLAGS, RULES, SCRAPE, Server, detect
from inferwatch.deploy._result import Result
from inferwatch.promapi import ApiError, Client, ClientOptions

MISSED_SHARE = 0.1  # of a group's iterations: more missed than this is wrong, fewer a note

__all__ = ["detect_servers", "assign_roles", "skipped", "check_stored_up", "check_notifiers", "missed_iterations"]

_FLAG_NAMES = {"--prometheus": "Prometheus", "--scraper": "scraper", "--ruler": "ruler"}
_CANNOT = {
    QUERY: "stores nothing and answers no queries",
    SCRAPE: "scrapes nothing itself",
    RULES: "evaluates no rules and sends no alerts",
}


def _cannot(server: Server, role: str) -> str:
    empty = role == SCRAPE and server.kind in ("victoriametrics", "prometheus")
    return _CANNOT[role] + (" (its target list is empty)" if empty else "")


def detect_servers(urls: dict[str, str | None], options: ClientOptions) -> tuple[dict[str, Server], list[Result]]:
    """({flag: Server} of the URLs given that answer, a line for each that does not)."""
    servers, out = {}, []
    for flag, url in urls.items():
        if url is None:
            continue
        client = Client(url, options, _FLAG_NAMES[flag])
        try:
            server = detect(client, flag)
        except ApiError as err:
            out.append(Result("missing", _FLAG_NAMES[flag], str(err), f"check {flag}"))
            continue
        client.name = server.short  # errors name what answers: "cannot reach vmalert"
        servers[flag] = server
    return servers, out


def assign_roles(servers: dict[str, Server]) -> tuple[dict[str, Server | None], list[Result]]:
    """({role: the server asked, or None}, one line per server: what it is and does, or `wrong` when given under a
    flag whose role it cannot play)."""
    main = servers["--prometheus"]
    roles, out = {}, []
    for role, (flag, what) in ROLE_FLAGS.items():
        server = servers.get(flag)
        if server is not None:
            misplaced = role not in server.roles and flag != "--prometheus"
            wrong = f"{server.name} at {server.client.base} {_cannot(server, role)}"
            out.append(
                Result("wrong", f"backend {flag}", wrong, f"give {flag} the URL of {what}")
                if misplaced
                else Result("ok", f"backend {flag}", server.describe())
            )
        if server is not None and role not in server.roles:
            server = None
        if server is None and role in main.roles:
            server = main
        roles[role] = server
    return roles, out


def skipped(servers: dict[str, Server], role: str, *checks: str) -> list[Result]:
    """One `skipped` line per check that needs `role`, none of the servers given can play: why, and the flag."""
    flag, what = ROLE_FLAGS[role]
    main = servers["--prometheus"]
    given = servers.get(flag) if flag != "--prometheus" else None
    who = given or main
    why = f"{who.name} at {who.flag} {_cannot(who, role)}: give {flag} URL, {what}"
    return [Result("skipped", check, why) for check in checks]


def check_stored_up(store: Server) -> list[Result]:
    """Scrape health without a scraper's target list: the `up` series the scrapers wrote into the store. A target
    whose last scrape failed (up 0) is named; one that left discovery is not seen here (its `up` goes stale), so
    the ok line says so."""
    prom = store.client
    down = prom.query("up == 0")
    if not down and not prom.query("count(up)"):
        return [
            Result(
                "missing",
                "stored up",
                f"no up series in {store.name}: no scraper writes here",
                "check the scraper's remote write URL (vmagent -remoteWrite.url, Prometheus remote_write), "
                "and give --scraper URL",
            )
        ]
    out = [
        Result(
            "wrong",
            f"target {s['metric'].get('job', '')} {s['metric'].get('instance', '')}",
            f"down: its last scrape failed (up 0 in {store.short})",
            "give --scraper URL for the scrape error; check the port name and path of its monitor",
        )
        for s in sorted(down, key=lambda s: (s["metric"].get("job", ""), s["metric"].get("instance", "")))
    ]
    if out:
        return out
    up = int(float(prom.query("count(up)")[0]["value"][1]))
    return [
        Result(
            "ok",
            "stored up",
            f"the {up} targets whose up arrives in {store.short} are up (a target that "
            "left discovery is not seen without --scraper)",
        )
    ]


def _samples(client: Client, names: tuple[str, ...]) -> dict[str, list[tuple[dict, float]]]:
    """{name: [(labels, value)]} of `names` in the server's own /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = client.text("/metrics")
    out: dict[str, list[tuple[dict, float]]] = {name: [] for name in names}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in out:
                    out[sample.name].append((sample.labels, sample.value))
    except (ValueError, TypeError, IndexError) as err:
        raise ApiError(client.base + "/metrics", f"not a Prometheus exposition ({str(err)[:100]})") from None
    return out


SENT, ERRORS = "vmalert_alerts_sent_total", "vmalert_alerts_send_errors_total"


def check_notifiers(ruler: Client, expected: bool = True) -> list[Result]:
    """vmalert's notifiers (one `addr` per -notifier.url) and whether its sends got through: every send to one
    failing means it notifies nobody; some failing (since vmalert started) is a note."""
    found = _samples(ruler, (SENT, ERRORS))
    sent = {labels.get("addr", ""): value for labels, value in found[SENT]}
    errors = {labels.get("addr", ""): value for labels, value in found[ERRORS]}
    name = "vmalert sends alerts"
    if not sent:
        if not expected:
            return [
                Result(
                    "skipped",
                    name,
                    "no notifier in this stack, as told (--no-alertmanager): alerts fire in vmalert only",
                )
            ]
        return [
            Result(
                "missing",
                name,
                "no notifier configured (vmalert starts without one only when no alerting rule is loaded)",
                "start vmalert with -notifier.url=http://alertmanager:9093",
            )
        ]
    out = []
    for addr, total in sorted(sent.items()):
        failed = errors.get(addr, 0.0)
        if failed and failed >= total:
            out.append(
                Result(
                    "wrong",
                    name,
                    f"every one of {failed:g} sends to {addr} failed",
                    "check -notifier.url and that Alertmanager answers there",
                )
            )
        elif failed:
            out.append(Result("note", name, f"{failed:g} of {total:g} sends to {addr} failed since vmalert started"))
        else:
            out.append(Result("ok", name, f"to {addr}" + (f" ({total:g} sent)" if total else " (none sent yet)")))
    return out


def missed_iterations(ruler: Client) -> list[Result]:
    """vmalert's rule groups that missed iterations since it started (it evaluates late: give it more CPU):
    wrong when more than MISSED_SHARE of a group's iterations were missed, a note for a few (a busy start)."""
    names = ("vmalert_iteration_missed_total", "vmalert_iteration_total")
    samples = _samples(ruler, names)
    counts: dict[str, dict[str, float]] = {name: {} for name in names}
    for name in names:
        for labels, value in samples[name]:
            group = labels.get("group", "")
            counts[name][group] = counts[name].get(group, 0.0) + value
    out = []
    for group, missed in sorted(counts[names[0]].items()):
        if missed <= 0:
            continue
        share = missed / (missed + counts[names[1]].get(group, 0.0))
        status = "wrong" if share > MISSED_SHARE else "note"
        out.append(
            Result(
                status,
                f"rule group {group}",
                f"missed {missed:g} iterations since vmalert started ({share:.0%} of them)",
                "give vmalert more CPU or the group a longer interval",
            )
        )
    return out
