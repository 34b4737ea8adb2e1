"""Shared rules for the Python scripts that read and write user-named files
(scripts/data/*.py, scripts/eval/compare_sacrebleu.py): the rules rotor itself
follows (docs/training.md, "Nothing is lost").

- Command line: a bad command line, or a numeric argument out of its range,
  is one line `SCRIPT: error: ...` on standard error and exit status 2
  (`parser`, `int_arg`, `float_arg`, `usage`).
- Inputs must be regular files, opened without blocking (a FIFO or
  /dev/zero is refused, not read forever); text must be UTF-8, and an
  invalid byte is reported with its file and line (`read_text`,
  `read_lines`).
- Outputs may not be inputs (the same file by any path: `../`, a symbolic
  or a hard link); the folder of an output file must exist, an output
  directory is made when missing (`check_output_file`, `check_output_dir`). They are written under temporary names in their own
  folder, synced, and renamed into place only when every output of the run
  is complete (`Outputs`): an error leaves the previous files as they were
  and no temporary behind. The temporaries are named
  `.NAME.tmp-datascript-PID`; those of a process that no longer runs (one
  that was killed) are removed by the next run that writes NAME.
- Every failure (an OSError such as ENOSPC or EFBIG, invalid UTF-8, bad data)
  is one line `SCRIPT: error: ...` and exit status 1, never a traceback
  (`run`, `fail`); file names that are not UTF-8 are printed with their
  bytes escaped (`show`).

The scripts import it by adding their own folder (or scripts/data) to
sys.path, so that they run from any working directory.
"""
import argparse
import os
import re
import stat
import sys

TMP_TAG = ".tmp-datascript-"  # a temporary is "." + NAME + TMP_TAG + PID


class Failure(Exception):
    """A failure to report as one line; `status` is the exit status."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def prog():
    """The script's name as it prefixes its messages (argparse's `prog`)."""
    return os.path.basename(sys.argv[0]) or "script"


def show(name):
    """`name` (str or bytes) as printable text on one line: bytes that are
    not UTF-8 (kept by Python as surrogate escapes) become \\xNN, control and
    other unprintable characters \\xNN or \\uNNNN."""
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    name = str(name)
    out = []
    for c in name:
        code = ord(c)
        if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif c.isprintable():
            out.append(c)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def fail(message):
    """Stop the script: one line naming what is wrong, exit status 1."""
    raise Failure(message, 1)


def usage(message):
    """Stop the script for a bad command line: one line, exit status 2."""
    raise Failure(message, 2)


# ------------------------------------------------------------ arguments ----
class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block)."""

    def error(self, message):
        raise Failure(f"{message} (see --help)", 2)


def parser(description, **kwargs):
    """An argparse parser named after the script whose errors are one line
    `SCRIPT: error: ...` with exit status 2 (when called inside `run`)."""
    return _Parser(prog=prog(), description=description, **kwargs)


def int_arg(low=None, high=None):
    """An argparse `type` for an integer in [low, high] (None: unbounded)."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"{value}: must be at least {low}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{value}: must be at most {high}")
        return value

    return parse


def float_arg(low, high, low_open=True, high_open=True):
    """An argparse `type` for a finite number between `low` and `high`,
    each end excluded when its `*_open` is true."""

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        below = value <= low if low_open else value < low
        above = value >= high if high_open else value > high
        if value != value or below or above:
            interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
            raise argparse.ArgumentTypeError(f"{text}: must be in {interval}")
        return value

    return parse


# --------------------------------------------------------------- inputs ----
def _kind(mode):
    """What a non-regular file is, in words."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def _open_input(path):
    """A descriptor of `path` opened for reading, refused unless it is a
    regular file. O_NONBLOCK keeps a FIFO from blocking the open."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        fail(f"cannot read {show(path)}: {e.strerror}")
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            fail(f"cannot read {show(path)}: it is {_kind(mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_input(path):
    """Fail unless `path` can be opened for reading and is a regular file."""
    os.close(_open_input(path))


def read_bytes(path):
    """The whole content of the regular file `path`."""
    fd = _open_input(path)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as e:
        fail(f"cannot read {show(path)}: {e.strerror}")
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_text(path, universal_newlines=True):
    """The UTF-8 text of `path`, with line ends "\\r\\n" and "\\r" read as
    "\\n" (as Python's open() in text mode) unless `universal_newlines` is
    false. Invalid UTF-8 fails naming the file, line and byte."""
    data = read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        head = data[:e.start]
        line = head.count(b"\n") + head.count(b"\r") - head.count(b"\r\n") + 1
        column = e.start - max(head.rfind(b"\n"), head.rfind(b"\r"))
        fail(f"{show(path)}:{line}: invalid UTF-8 (byte 0x{data[e.start]:02x} at column "
             f"{column})")
    if not universal_newlines:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_lines(path, universal_newlines=True):
    """The lines of `path` (see read_text) without their "\\n", as iterating
    over a file opened in text mode gives them."""
    lines = read_text(path, universal_newlines).split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


# -------------------------------------------------------------- outputs ----
def _same(a, b):
    """Whether the existing paths `a` and `b` are one file."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _refuse_inputs(path, inputs):
    """Fail when the output `path` is one of `inputs` by any name."""
    for name in inputs:
        if os.path.realpath(path) == os.path.realpath(name) or _same(path, name):
            fail(f"{show(path)}: the output is the input {show(name)}; name another output")


def check_output_file(path, inputs=()):
    """Fail unless `path` can be written as an output: not a directory,
    block device or socket, not one of `inputs`, in a folder that exists."""
    if not path:
        usage("an empty output name")
    target = os.path.realpath(path)  # a symbolic link keeps its link: its target is written
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        fail(f"cannot write {show(path)}: {e.strerror}")
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)
                                 or stat.S_ISCHR(mode)):
        fail(f"cannot write {show(path)}: it is {_kind(mode)}")
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        what = "is not a directory" if os.path.exists(folder) else "does not exist"
        fail(f"cannot write {show(path)}: the folder {show(os.path.dirname(path) or '.')} {what}")
    _refuse_inputs(path, inputs)


def check_output_dir(path, names, inputs=()):
    """Fail unless `path` is a directory, or can be made one, to write the
    files `names` into: not an existing non-directory, and none of the files
    one of `inputs`."""
    if not path:
        usage("an empty output name")
    if os.path.exists(path) and not os.path.isdir(path):
        fail(f"cannot write into {show(path)}: it exists and is not a directory")
    for name in names:
        _refuse_inputs(os.path.join(path, name), inputs)


def _alive(pid):
    """Whether process `pid` runs (or might: it belongs to another user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_leftovers(folder, name):
    """Remove the temporaries of `name` in `folder` that processes which no
    longer run (or this one, before it made any) left behind."""
    pattern = re.compile(re.escape("." + name + TMP_TAG) + r"(\d+)\Z")
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        match = pattern.match(entry)
        if match and (int(match.group(1)) == os.getpid() or not _alive(int(match.group(1)))):
            try:
                os.unlink(os.path.join(folder, entry))
            except FileNotFoundError:
                pass


class Outputs:
    """The output files of one run, made complete or not at all.

        with Outputs() as out:
            out.add(path, text)     # written and synced under a temporary name
            ...
            out.commit()            # renamed into place, one after the other

    Leaving the block without commit(), by an error or an interrupt, removes
    the temporaries (and the directories make_dir created, when empty), so
    that the previous files stay as they were. Once every file is complete,
    the renames are a few system calls in a row: only a kill between two of
    them would leave old and new files side by side. An output that is a
    symbolic link keeps its link (its target is replaced); a FIFO or a
    character device (/dev/null) is written into at commit(), not replaced.
    """

    def __init__(self):
        self._staged = []  # (temporary or None, target, what to write, path as named)
        self._made = []
        self._done = False

    def __enter__(self):
        return self

    def __exit__(self, kind, value, trace):
        if not self._done:
            self.abort()
        return False

    def make_dir(self, path):
        """Create the directory `path` and its missing parents."""
        missing = []
        head = path
        while head and not os.path.isdir(head):
            missing.append(head)
            parent = os.path.dirname(head)
            if parent == head:
                break
            head = parent
        for folder in reversed(missing):
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not os.path.isdir(folder):
                    fail(f"cannot create the directory {show(path)}: {show(folder)} exists "
                         "and is not a directory")
                continue
            except OSError as e:
                fail(f"cannot create the directory {show(path)}: {e.strerror}")
            self._made.append(folder)

    def add(self, path, text):
        """Write `text` (str, as UTF-8, or bytes) as the new content of `path`."""
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        target = os.path.realpath(path)
        try:
            old = os.stat(target)
        except FileNotFoundError:
            old = None
        except OSError as e:
            fail(f"cannot write {show(path)}: {e.strerror}")
        if old is not None and (stat.S_ISFIFO(old.st_mode) or stat.S_ISCHR(old.st_mode)):
            self._staged.append((None, target, data, path))
            return
        if old is not None and not stat.S_ISREG(old.st_mode):
            fail(f"cannot write {show(path)}: it is {_kind(old.st_mode)}")
        folder, name = os.path.split(target)
        remove_leftovers(folder, name)
        temporary = os.path.join(folder, "." + name + TMP_TAG + str(os.getpid()))
        mode = stat.S_IMODE(old.st_mode) if old is not None else 0o666
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        except OSError as e:
            fail(f"cannot write {show(path)}: {e.strerror}")
        self._staged.append((temporary, target, None, path))
        try:
            try:
                if old is not None:
                    os.fchmod(fd, mode)  # the old file's permissions, not the umask's
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            fail(f"cannot write {show(path)}: {e.strerror}")

    def commit(self):
        """Put every added file in place."""
        for temporary, target, data, path in self._staged:
            if temporary is None:  # a FIFO or a character device: written into
                try:
                    fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
                    try:
                        _write_all(fd, data)
                    finally:
                        os.close(fd)
                except OSError as e:
                    fail(f"cannot write {show(path)}: {e.strerror}")
        folders = set()
        for temporary, target, data, path in self._staged:
            if temporary is not None:
                try:
                    os.replace(temporary, target)
                except OSError as e:
                    fail(f"cannot write {show(path)}: {e.strerror}")
                folders.add(os.path.dirname(target))
        self._done = True
        for folder in folders:  # make the renames durable; not all file systems can
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError:
                pass

    def abort(self):
        """Remove the temporaries and the directories made for them."""
        for temporary, _, _, _ in self._staged:
            if temporary is not None:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
        for folder in reversed(self._made):
            try:
                os.rmdir(folder)
            except OSError:
                pass
        self._staged, self._made, self._done = [], [], True


def _write_all(fd, data):
    """os.write until all of `data` is written (or an OSError: ENOSPC, EFBIG)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_file(path, text, inputs=()):
    """Check `path` as an output (check_output_file) and write `text` to it
    through a temporary and a rename."""
    check_output_file(path, inputs)
    with Outputs() as out:
        out.add(path, text)
        out.commit()


# ---------------------------------------------------------- the one exit ----
def say(text):
    """Print a line to standard output; a failure to is one error line."""
    try:
        print(text)
    except OSError as e:
        raise Failure(f"cannot write standard output: {e.strerror}") from None


def _error(message, status):
    """Print `message` as the script's one error line and exit."""
    try:
        sys.stderr.write(f"{prog()}: error: {show(message)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        # Standard output fails (a closed pipe, a full disk): point it at
        # /dev/null, so that Python's flush at exit adds no second message.
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass
    sys.exit(status)


def _describe(e):
    """One line for an exception the script did not turn into a Failure."""
    if isinstance(e, UnicodeDecodeError):
        return f"invalid UTF-8: {e}"
    if isinstance(e, OSError):
        if e.filename is not None:
            where = show(e.filename)
            if e.filename2 is not None:
                where += f" -> {show(e.filename2)}"
            return f"{where}: {e.strerror or e}"
        return e.strerror or str(e) or type(e).__name__
    if isinstance(e, MemoryError):
        return "out of memory"
    if isinstance(e, (ValueError, ImportError)):
        return str(e) or type(e).__name__
    trace = e.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    where = (f" at {os.path.basename(trace.tb_frame.f_code.co_filename)}:{trace.tb_lineno}"
             if trace is not None else "")
    return f"internal error{where}: {type(e).__name__}: {e}"


def run(main):
    """Call `main()` (its return value, None or an int, is the exit status)
    and exit; every failure is one line on standard error: exit status 2 for
    a bad command line, 1 otherwise (130 for an interrupt)."""
    try:
        status = main()
        try:
            sys.stdout.flush()
        except OSError as e:
            raise Failure(f"cannot write standard output: {e.strerror}") from None
    except Failure as e:
        _error(str(e), e.status)
    except KeyboardInterrupt:
        _error("interrupted", 130)
    except Exception as e:  # noqa: BLE001 -- the one error path
        _error(_describe(e), 1)
    sys.exit(status or 0)
