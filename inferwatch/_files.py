"""Every file the user names goes through here: inputs are read once, capped in size, never block on a FIFO or
device, and every way they can be unusable becomes one InputError line naming the path (exit 2); outputs (-o)
replace a regular file atomically and never turn a device, FIFO or symlink into a regular file."""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from inferwatch.errors import InputError

__all__ = [
    "MAX_INPUT_ENV",
    "DEFAULT_MAX_INPUT",
    "max_input",
    "shown",
    "read_input",
    "read_input_text",
    "check_readable",
    "output_dir",
    "write_file",
    "write_output",
]

MAX_INPUT_ENV = "INFERWATCH_MAX_INPUT"
DEFAULT_MAX_INPUT = 64 * 1024 * 1024  # 64 MiB: 10x the largest real dashboard bundle or rule file we have seen
_UNITS = {
    "": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 1024**3,
}


def parse_size(text: str) -> int:
    """`64MiB`, `10mb`, `5000` as a byte count; ValueError otherwise."""
    raw = text.strip().lower()
    digits = raw.rstrip("kmgib")
    unit = raw[len(digits) :]
    if not digits.isdigit() or unit not in _UNITS:
        raise ValueError(f"{text!r}: give a size such as 64MiB, 500MB or 1000000")
    return int(digits) * _UNITS[unit]


def max_input() -> int:
    """The largest input read, in bytes: $INFERWATCH_MAX_INPUT (or --max-input) else DEFAULT_MAX_INPUT."""
    value = os.environ.get(MAX_INPUT_ENV)
    if not value:
        return DEFAULT_MAX_INPUT
    try:
        return parse_size(value)
    except ValueError as err:
        raise InputError(f"${MAX_INPUT_ENV}: {err}") from None


def shown(path) -> str:
    """A path as text for a message; bytes of a file name that are not UTF-8 stay surrogate-escaped, and the CLI's
    streams write them back as the same bytes (the name as `ls` lists it), never an error."""
    return os.fsdecode(path)


def _refuse(path, flag: str | None, why: str) -> InputError:
    return InputError(f"{flag + ' ' if flag else ''}{shown(path)}: {why}")


def read_input(path, flag: str | None = None, limit: int | None = None) -> bytes:
    """The bytes of `path` (`-`: standard input), at most `limit` (default max_input()). A FIFO with no writer
    reads as empty instead of blocking; a folder, a missing file or one over the cap is an InputError."""
    limit = max_input() if limit is None else limit
    if str(path) == "-":
        return _read_capped(sys.stdin.buffer, "<stdin>", flag, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise _refuse(path, flag, f"cannot read: {err.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise _refuse(path, flag, "is a folder; give a file")
        if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
            raise _refuse(path, flag, "is not a regular file")
        os.set_blocking(fd, True)  # a FIFO without a writer now reads as end of file, a pipe with one waits for it
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return _read_capped(stream, path, flag, limit)
    except OSError as err:
        raise _refuse(path, flag, f"cannot read: {err.strerror}") from None
    finally:
        os.close(fd)


def _read_capped(stream, path, flag: str | None, limit: int) -> bytes:
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise _refuse(
            path,
            flag,
            f"larger than the input cap of {limit} bytes; raise it with --max-input SIZE "
            f"(or ${MAX_INPUT_ENV}) if this input is meant",
        )
    return data


def read_input_text(path, flag: str | None = None, limit: int | None = None) -> str:
    """read_input decoded as UTF-8 (a BOM dropped); bytes that are not UTF-8 are an InputError naming the offset."""
    data = read_input(path, flag, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise _refuse(
            "<stdin>" if str(path) == "-" else path,
            flag,
            f"not UTF-8 text (byte {data[err.start]:#04x} at offset {err.start}); save it as UTF-8",
        ) from None


def check_readable(path, flag: str) -> str:
    """`path` as a string once it is known to be a readable regular file (a CA, a certificate, a key), so a
    library that opens it later cannot fail with a traceback."""
    read_input(path, flag)
    return os.fsdecode(path)


def output_dir(path: Path, flag: str = "--out") -> Path:
    """Create the folder `path` (and its parents), or say why it cannot be one."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {shown(path)}: is a file, not a folder; give a folder (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(
            f"{flag} {shown(path)}: cannot create the folder ({err.strerror}); give a folder you can write to"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{flag} {shown(path)}: the folder is not writable; give a folder you can write to")
    return path


def write_file(path: Path, text: str, flag: str = "--out") -> None:
    """write_output under another name, kept for the commands that write into an --out folder."""
    write_output(path, text, flag)


def write_output(path, text: str, flag: str = "--out") -> None:
    """Write `text` as UTF-8 to what the user named. A new path or a regular file is replaced whole (a temporary
    file renamed over it: never empty or partial); a symlink is followed to what it names; a device, FIFO or
    /dev/stdout is written through and never replaced; a FIFO without a reader, a folder or any OSError is one
    InputError naming the path."""
    path = Path(path)
    data = text.encode("utf-8", "surrogateescape")  # a file name quoted in the text keeps its own bytes
    try:
        try:
            mode = os.stat(path).st_mode  # what a symlink names: the link itself stays a link
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISDIR(mode):
            raise InputError(f"{flag} {shown(path)}: is a folder; give a file name")
        if mode is None or stat.S_ISREG(mode):
            _replace(Path(os.path.realpath(path)), data)
        else:
            _write_through(path, data)  # /dev/stdout names a pipe through /proc: opened, never resolved
    except OSError as err:
        why = "a FIFO nobody is reading" if err.errno == errno.ENXIO else err.strerror
        raise InputError(f"{flag} {shown(path)}: cannot write: {why}; give a path you can write to") from None


def _replace(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=".inferwatch.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        umask = os.umask(0)
        os.umask(umask)
        mode = os.stat(path).st_mode & 0o7777 if path.exists() else 0o666 & ~umask
        os.chmod(tmp, mode)  # as open() would have made it, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_through(path: Path, data: bytes) -> None:
    """A device or FIFO: opened for writing as it is (no create, no truncate); a FIFO nobody reads is refused at
    once (ENXIO) rather than waited on."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
