"""The CLI input matrix: every command that reads a file the user names, fed each hostile input, answers with one
`error:` line (or its own report) naming the path, exits non-zero (2 when the file cannot be read at all), prints
no traceback, stays under a memory ceiling and never hangs. Each run is a real process; the timeout is a hang
detector, not a speed requirement."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from inferwatch._files import write_output
from inferwatch.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures"
MEMORY_CEILING = 4 * 1024**3  # address space per run: a bomb expanded (6 GB before the fix) fails it
HANG = 120  # seconds: generous; every run here takes well under one on an idle machine
CAP = "1MiB"  # the input cap under test (the default is 64MiB; the mechanism is the same)

# One command per reader (slo compile and explain share slo check's, normalize -m mappings check's): the matrix
# stays under ~30 s of CPU, most of it Python starting.
# (name, arguments where {f} is the hostile path and {tmp} a scratch folder, the hostile contents it reads)
ALL, AS_TEXT = "all", "as text"
COMMANDS = [
    ("normalize", ["normalize", "{f}"], AS_TEXT),
    ("mappings check", ["mappings", "check", "{f}"], ALL),
    ("slo check", ["slo", "check", "{f}"], ALL),
    ("slo import", ["slo", "import", "{f}"], ALL),
    ("dashboards lint", ["dashboards", "lint", "{f}"], ALL),
    ("doctor --file", ["doctor", "--file", "{f}", "--no-alertmanager"], ALL),
    ("deploy render --config", ["deploy", "render", "--config", "{f}", "-o", "{tmp}/out"], ALL),
    ("exporter normalize --config", ["exporter", "normalize", "--config", "{f}"], ALL),
    ("triage --rules", ["triage", "--prometheus", "http://127.0.0.1:9", "--rules", "{f}"], ALL),
    # a token or a CA is not parsed here: only whether it can be read (and, for the token, whether it is text)
    (
        "triage --bearer-token-file",
        ["triage", "--prometheus", "http://127.0.0.1:9", "--bearer-token-file", "{f}"],
        ("non-utf8-content", "binary"),
    ),
    ("triage --ca-file", ["triage", "--prometheus", "https://127.0.0.1:9", "--ca-file", "{f}"], ()),
]
FOLDERS_ALLOWED = {"dashboards lint", "doctor --file"}  # a folder is a legal input there: read file by file


def _bomb() -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def _make(kind: str, tmp: Path) -> str:
    """The hostile input `kind` under `tmp`, as the path to pass."""
    path = tmp / f"{kind}.yaml"
    if kind == "nonexistent":
        return str(tmp / "nope.yaml")
    if kind == "directory":
        (tmp / "folder").mkdir()
        return str(tmp / "folder")
    if kind == "dev-zero":
        return "/dev/zero"
    if kind == "fifo-no-writer":
        os.mkfifo(path)
        return str(path)
    if kind == "non-utf8-name":
        name = os.fsencode(tmp) + b"/caf\xe9.yaml"
        with open(name, "wb") as handle:
            handle.write(b"version: 99\nnot: [closed\n")
        return os.fsdecode(name)
    content = {
        "alias-bomb": _bomb().encode(),
        "deep-json": b"[" * 100_000 + b"]" * 100_000,
        "non-utf8-content": "version: 1\nservice: caf\u00e9\n".encode("latin-1"),
        "huge": b"# " + b"x" * (2 * 1024 * 1024) + b"\n",
        "empty": b"",
        "binary": bytes(range(256)) * 64,
    }[kind]
    path.write_bytes(content)
    return str(path)


UNREADABLE = ["nonexistent", "directory", "dev-zero", "huge"]  # never read at all: exit 2
CONTENT = ["alias-bomb", "deep-json", "non-utf8-content", "non-utf8-name", "empty", "binary", "fifo-no-writer"]


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CEILING, MEMORY_CEILING))


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "INFERWATCH_MAX_INPUT": CAP, "NO_PROXY": "*"}
    try:
        return subprocess.run(
            [sys.executable, "-m", "inferwatch", *args],
            capture_output=True,
            timeout=HANG,
            stdin=subprocess.DEVNULL,
            env=env,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: inferwatch {' '.join(args)} ran past {HANG}s")


@pytest.mark.parametrize("kind", UNREADABLE + CONTENT)
@pytest.mark.parametrize("name,args,reads", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_hostile_input(name, args, reads, kind, tmp_path):
    if kind == "directory" and name in FOLDERS_ALLOWED:
        pytest.skip("a folder is a legal input here")
    if (
        kind in CONTENT
        and reads != ALL
        and (reads == AS_TEXT and kind not in ("alias-bomb", "deep-json") or reads != AS_TEXT and kind not in reads)
    ):
        pytest.skip("content this option does not parse")
    path = _make(kind, tmp_path)
    proc = _run([a.format(f=path, tmp=tmp_path) for a in args])
    out, err = proc.stdout.decode("utf-8", "surrogateescape"), proc.stderr.decode("utf-8", "surrogateescape")
    assert "Traceback" not in out + err, err[-3000:]
    if reads == AS_TEXT and kind in CONTENT:  # an exposition is text: a YAML bomb is lines, passed or refused
        assert proc.returncode == 0 or path in err, (out[-500:], err[-500:])
        return
    assert proc.returncode != 0, (proc.returncode, out[-500:], err[-500:])
    if kind in UNREADABLE or reads != ALL:
        lines = [line for line in err.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (proc.returncode, err)
        assert path in lines[0], lines[0]
    elif kind != "fifo-no-writer":
        assert path in out + err, (out[-500:], err[-500:])


# --- outputs: one write_output for every -o; only a regular file or a new path is ever replaced -----------------


def _node(tmp: Path, name: str, minor: int) -> Path:
    """A character device like /dev/null (minor 3) or /dev/full (minor 7) inside `tmp`."""
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    path = tmp / name
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("this container may not create device nodes (no CAP_MKNOD)")
    return path


def test_output_regular_file_and_new_path_are_replaced_whole(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("old and longer\n")
    old.chmod(0o640)
    write_output(old, "new\n")
    write_output(tmp_path / "sub" / "new.yaml", "fresh\n")
    assert old.read_text() == "new\n" and stat.S_IMODE(old.stat().st_mode) == 0o640
    assert (tmp_path / "sub" / "new.yaml").read_text() == "fresh\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.yaml", "sub"]  # no temporary file left


def test_output_symlink_is_written_through(tmp_path):
    target, link = tmp_path / "target.yaml", tmp_path / "link.yaml"
    target.write_text("old\n")
    link.symlink_to(target)
    write_output(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"


def test_output_fifo_is_written_through_or_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="a FIFO nobody is reading"):
        write_output(fifo, "x\n", "-o")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_output(fifo, "through\n", "-o")
        assert os.read(reader, 100) == b"through\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_device_is_written_through_never_replaced(tmp_path):
    null, full = _node(tmp_path, "null", 3), _node(tmp_path, "full", 7)
    write_output(null, "gone\n", "-o")
    with pytest.raises(InputError, match=f"-o {full}: cannot write: No space left on device"):
        write_output(full, "x\n", "-o")
    assert stat.S_ISCHR(os.lstat(null).st_mode) and stat.S_ISCHR(os.lstat(full).st_mode)


def test_output_folder_is_refused(tmp_path):
    with pytest.raises(InputError, match="is a folder; give a file name"):
        write_output(tmp_path, "x\n", "-o")


def test_slo_import_to_a_device_keeps_the_device(tmp_path):
    full = _node(tmp_path, "full", 7)
    proc = _run(["slo", "import", str(FIXTURES / "slo/openslo-v1.yaml"), "-o", str(full)])
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err.startswith(f"error: --out {full}: cannot write: No space left"), err
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_slo_import_through_a_symlink_and_to_dev_stdout(tmp_path):
    target, link = tmp_path / "spec.yaml", tmp_path / "link.yaml"
    target.write_text("")
    link.symlink_to(target)
    assert _run(["slo", "import", str(FIXTURES / "slo/openslo-v1.yaml"), "-o", str(link)]).returncode == 0
    assert link.is_symlink() and target.read_text().startswith("version: 1")
    proc = _run(["slo", "import", str(FIXTURES / "slo/openslo-v1.yaml"), "-o", "/dev/stdout"])
    assert proc.returncode == 0 and proc.stdout.decode().startswith("version: 1")


def test_long_output_name_and_full_stdout_are_one_line(tmp_path):
    long_name = str(tmp_path / ("x" * 5000))
    proc = _run(["slo", "import", str(FIXTURES / "slo/openslo-v1.yaml"), "-o", long_name])
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "File name too long" in err and len(err.splitlines()) == 1, err
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "inferwatch", "mappings", "catalog"],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=HANG,
        )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err == "error: standard output: cannot write: No space left on device\n", err


# --- the YAML bounds themselves (in-process: cheap) -----------------------------------------------------------


def test_yaml_bounds_count_what_aliases_expand_to():
    from inferwatch.yamlio import TooLarge, safe_load

    with pytest.raises(TooLarge, match="expands to more than"):
        safe_load(_bomb())
    deep_by_alias = "a: &a " + "[" * 300 + "]" * 300 + "\nb: " + "[" * 300 + "*a" + "]" * 300 + "\n"
    with pytest.raises(TooLarge, match="nested deeper than 500"):
        safe_load(deep_by_alias)  # each half is shallow; the alias makes it 600 deep
    with pytest.raises(TooLarge):
        safe_load("a: &a [*a]\n")  # a recursive alias is never a real config
    assert safe_load("x: &x {k: [1, 2]}\ny: [*x, *x]\n") == {"x": {"k": [1, 2]}, "y": [{"k": [1, 2]}] * 2}
