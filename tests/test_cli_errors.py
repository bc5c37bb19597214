"""Every kind of user mistake gets one line on stderr that names the file or flag and says what would be valid,
exit status 1 (bad content) or 2 (bad usage, or a file that cannot be read or written at all), and never a traceback.
Each command runs as a real process."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

SPEC = ROOT / "slo/examples/chat.yaml"
OPENSLO = ROOT / "tests/fixtures/slo/openslo-v1.yaml"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("bad")
    latin1 = tmp / "latin1.yaml"
    latin1.write_bytes("version: 1\nservice: caf\u00e9\n".encode("latin-1"))
    exposition = tmp / "latin1.txt"
    exposition.write_bytes("# TYPE caf\u00e9 gauge\n".encode("latin-1"))
    a_file = tmp / "a-file"
    a_file.write_text("not a folder\n")
    return {"latin1": latin1, "latin1-exposition": exposition, "file": a_file, "dir": tmp}


@pytest.fixture(scope="module")
def busy_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "inferwatch", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def one_clear_line(proc: subprocess.CompletedProcess, codes: tuple[int, ...], *words: str) -> str:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode in codes, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert all(w in lines[0] for w in words), (words, lines[0])
    return lines[0]


# (name, arguments with {latin1}-style placeholders, the file the one line must name)
NOT_UTF8 = [
    ("slo compile", ["slo", "compile", "{latin1}", "-o", "{dir}/out"], "latin1"),
    ("slo explain", ["slo", "explain", "{latin1}"], "latin1"),
    ("slo check", ["slo", "check", "{latin1}"], "latin1"),
    ("slo test", ["slo", "test", "{latin1}"], "latin1"),
    ("slo import", ["slo", "import", "{latin1}"], "latin1"),
    ("mappings check", ["mappings", "check", "{latin1}"], "latin1"),
    ("mappings relabel -m", ["mappings", "relabel", "-m", "{latin1}"], "latin1"),
    ("mappings rules -m", ["mappings", "rules", "-m", "{latin1}"], "latin1"),
    ("normalize -m", ["normalize", "-m", "{latin1}", "{latin1-exposition}"], "latin1"),
    ("normalize FILE", ["normalize", "{latin1-exposition}"], "latin1-exposition"),
    ("exporter normalize --config", ["exporter", "normalize", "--config", "{latin1}"], "latin1"),
]


@pytest.mark.parametrize("name,args,key", NOT_UTF8, ids=[c[0] for c in NOT_UTF8])
def test_non_utf8_input_is_named(name, args, key, files):
    proc = run(*[a.format(**files) for a in args])
    one_clear_line(proc, (2,), str(files[key]), "not UTF-8", "save it as UTF-8")


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--listen", "127.0.0.1:{port}"],
        ["exporter", "normalize", "--target", "localhost:9", "--listen", "127.0.0.1:{port}"],
    ],
    ids=["simulate", "exporter normalize"],
)
def test_busy_port_is_one_line_and_nothing_claims_to_serve(args, busy_port):
    proc = run(*[a.format(port=busy_port) for a in args])
    one_clear_line(proc, (1,), f"--listen 127.0.0.1:{busy_port}", "already in use", "--listen HOST:PORT")
    assert "serving" not in proc.stdout + proc.stderr


def test_a_bad_listen_address_gives_the_simulators_own_example():
    """simulate --listen read the exporter's parser, whose example was the exporter's port 9400."""
    proc = run("simulate", "--listen", "localhost")
    one_clear_line(proc, (1,), "--listen", "'localhost' is not HOST:PORT, e.g. 127.0.0.1:8000")


BAD_URLS = [
    (["dashboards", "push", "--grafana-url", "not-a-url"], "--grafana-url"),
    (["exporter", "normalize", "--target", "not-a-url"], "--target"),
    (["exporter", "normalize", "--target", "ftp://host:21/metrics"], "--target"),
    (["load", "--target", "not-a-url"], "--target"),
    (["load", "--target", "http://host:99999"], "--target"),
]


@pytest.mark.parametrize("args,flag", BAD_URLS, ids=[" ".join(a[:2] + a[-1:]) for a, _ in BAD_URLS])
def test_a_url_that_is_not_one_is_refused(args, flag):
    one_clear_line(run(*args), (2,), flag, "not an http(s) URL or HOST:PORT", "e.g. ")


@pytest.mark.parametrize("size", ["16", "0", "-1MiB", "lots"])
def test_a_max_body_that_is_not_a_size_is_refused(size):
    line = one_clear_line(
        run("exporter", "normalize", "--target", "localhost:9", "--max-body", size),
        (2,),
        "--max-body",
        f"{size!r}",
        "MiB",
    )
    assert ("under 1KiB (a bare number is bytes)" if size == "16" else "is not a size such as") in line


def test_grafana_url_is_required():
    one_clear_line(run("dashboards", "push"), (2,), "--grafana-url")


OUTPUTS = [
    ("build", ["build", "-o", "{out}"]),
    ("slo compile", ["slo", "compile", str(SPEC), "-o", "{out}"]),
    ("dashboards build", ["dashboards", "build", "-o", "{out}"]),
]


@pytest.mark.parametrize("kind", ["an existing file", "under a file"])
@pytest.mark.parametrize("name,args", OUTPUTS, ids=[n for n, _ in OUTPUTS])
def test_unusable_output_folder(name, args, kind, files):
    out = files["file"] if kind == "an existing file" else files["file"] / "sub"
    line = one_clear_line(run(*[a.format(out=out) for a in args]), (2,), f"--out {out}", "give a folder")
    assert ("is a file, not a folder" if kind == "an existing file" else "cannot create the folder") in line


@pytest.mark.parametrize("kind", ["a folder", "under a file"])
def test_unusable_import_output_file(kind, files):
    out = files["dir"] if kind == "a folder" else files["file"] / "spec.yaml"
    proc = run("slo", "import", str(OPENSLO), "-o", str(out))
    one_clear_line(proc, (1, 2), f"--out {out}", "give a")
    assert not (files["file"].is_dir()) and proc.stdout == ""
