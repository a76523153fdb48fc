"""Every file a user names, local or not: the one module that touches them.

Users' paths may be local or on a filesystem TensorFlow reaches through `tf.io.gfile`: Google
Cloud Storage (`gs://bucket/...`) on TPU and cluster jobs, HDFS and S3 through TensorFlow's
filesystem plugins, and `ram://` (TensorFlow's in-memory filesystem, which the tests use as a
stand-in for a remote store). A path with a scheme (`scheme://...`) goes through `tf.io.gfile`;
a local path through Python's own file calls, which is what `tf.io.gfile` does for it, without
importing TensorFlow into the scripts that otherwise never need it (create_pretraining_data.py,
the tokenizer). Callers never tell the two apart.

Writes are atomic, in a form that works on object stores: the data goes to a temporary name in
the same directory (`<name>.tmp-<pid>`), which is renamed over the final name only when it is
complete; a failure removes it. No half-written file is ever left under the final name.

    with storage.atomic_output("gs://b/run/eval_results.txt") as f:
        f.write("loss = 1.5\\n")
    text = storage.read_bytes("gs://b/run/eval_results.txt").decode("utf-8")

Strict UTF-8 text reading with file:line errors is `bert_realformer.text_files`, built on this.
"""

from __future__ import annotations

import contextlib
import errno
import glob as _glob
import hashlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence

from bert_realformer.errors import InputError, stop_if_terminated

_SCHEME = "://"


class UnreadableFileError(InputError):
    """A file that cannot be opened or read: "PATH: cannot be read (REASON)"."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: cannot be read ({reason})")
        self.path, self.reason = path, reason


def is_local(path: str) -> bool:
    """True for a path of this machine's filesystem (no `scheme://`, or `file://`)."""
    return _SCHEME not in path or path.startswith("file://")


def _local(path: str) -> str:
    return path[len("file://"):] if path.startswith("file://") else path


def _gfile():
    import tensorflow as tf
    return tf.io.gfile


def _reason(error: Exception) -> str:
    """A short reason for an OSError or a TensorFlow OpError."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    message = getattr(error, "message", None) or str(error)
    return message.strip().splitlines()[0] if message.strip() else type(error).__name__


def _io_errors() -> tuple[type[BaseException], ...]:
    """The exception types a file operation raises (TensorFlow's only when it is imported)."""
    tf = sys.modules.get("tensorflow")
    return (OSError, tf.errors.OpError) if tf is not None else (OSError,)


_WRITE_FAILURES = (("Read-only file system", errno.EROFS), ("No space left on device", errno.ENOSPC),
                   ("Disk quota exceeded", errno.EDQUOT), ("Permission denied", errno.EACCES))


def write_error(error: BaseException, path: str) -> OSError:
    """The `OSError` of a failed write of `path`: Python's as it is (named `path` when it names
    nothing), TensorFlow's (an `OpError` from an op that writes) as the `OSError` its message
    describes, so the scripts end on it in one line (read-only, full, not permitted)."""
    if isinstance(error, OSError):
        if not error.filename:
            error.filename = path
        return error
    message = getattr(error, "message", None) or str(error)
    number = next((number for text, number in _WRITE_FAILURES if text in message), errno.EIO)
    return OSError(number, os.strerror(number) if number != errno.EIO else _reason(error), path)


# ------------------------------------------------------------------ queries
def _listed(path: str) -> bool:
    """Whether `path` is an entry of its parent directory. Some filesystems answer `exists` and
    `isdir` by name prefix (`ram://d/ckpt-4` "exists" when `ram://d/ckpt-4.index` does)."""
    parent, name = os.path.split(path.rstrip("/"))
    if not name or parent.endswith(":") or not _gfile().isdir(parent):
        return True  # a bucket or filesystem root
    return name in {entry.rstrip("/") for entry in _gfile().listdir(parent)}


def exists(path: str) -> bool:
    if is_local(path):
        return os.path.exists(_local(path))
    return _gfile().exists(path) and _listed(path)


def isdir(path: str) -> bool:
    if is_local(path):
        return os.path.isdir(_local(path))
    return _gfile().isdir(path) and _listed(path)


def isfile(path: str) -> bool:
    """An existing path that is not a directory."""
    if is_local(path):
        return os.path.isfile(_local(path))
    return _gfile().exists(path) and not _gfile().isdir(path)


def size(path: str) -> int:
    """Bytes in the file at `path`."""
    return os.path.getsize(_local(path)) if is_local(path) else _gfile().stat(path).length


def listdir(path: str) -> list[str]:
    """The names in directory `path` (sorted; a remote directory's names without a trailing '/')."""
    names = os.listdir(_local(path)) if is_local(path) else [n.rstrip("/") for n in _gfile().listdir(path)]
    return sorted(names)


def check_readable_dir(path: str) -> None:
    """An `UnreadableFileError` naming directory `path` when its names cannot be listed (no
    permission), so that "no such file in it" is never said of a directory that was not read."""
    try:
        listdir(path)
    except _io_errors() as error:
        raise UnreadableFileError(path, _reason(error)) from None


def glob(pattern: str) -> list[str]:
    """The paths matching `pattern`, sorted."""
    if is_local(pattern):
        return sorted(_glob.glob(_local(pattern)))
    return sorted(_gfile().glob(pattern))


def open_file(path: str, mode: str = "rb"):
    """A file object on `path` ('rb', 'r', 'wb', 'w', 'ab', 'a'); text modes are UTF-8. An
    `UnreadableFileError` naming the path when it cannot be opened for reading."""
    try:
        if is_local(path):
            if "b" in mode:
                return open(_local(path), mode, buffering=1 << 20)
            return open(_local(path), mode, encoding="utf-8")
        if "r" in mode and not _gfile().exists(path):  # GFile opens lazily: say it now
            raise FileNotFoundError(errno.ENOENT, "No such file or directory")
        return _gfile().GFile(path, mode)
    except _io_errors() as error:
        if "r" in mode:
            raise UnreadableFileError(path, _reason(error)) from None
        raise


def read_bytes(path: str) -> bytes:
    """All of `path`; an `UnreadableFileError` naming it when it cannot be read."""
    with open_file(path, "rb") as f:
        try:
            return f.read()
        except _io_errors() as error:
            raise UnreadableFileError(path, _reason(error)) from None


def file_digest(path: str) -> str:
    """The SHA-256 of `path`'s bytes, in hex."""
    return hashlib.sha256(read_bytes(path)).hexdigest()


# ------------------------------------------------------------------ writing
def makedirs(path: str) -> None:
    """Creates directory `path` and its parents (nothing when it exists)."""
    if is_local(path):
        os.makedirs(_local(path), exist_ok=True)
    else:
        _gfile().makedirs(path)


def check_writable_dir(path: str, option: str) -> None:
    """Creates directory `path` if needed and writes and removes a small file in it: an
    `InputError` naming `option` when that fails (read-only filesystem, no permission, a file on
    the way), so a run finds out before anything expensive."""
    probe = os.path.join(path, f".write-check-{os.getpid()}")
    try:
        if exists(path) and not isdir(path):
            raise InputError(f"{option}={path} is a file, not a directory", options=(option,))
        makedirs(path)
        with open_file(probe, "wb") as f:
            f.write(b"")
        remove(probe)
    except _io_errors() as error:
        raise InputError(f"{option}={path} cannot be written: {_reason(error)}", options=(option,)) from None


def check_file_target(path: str, option: str) -> None:
    """Before any work: an `InputError` naming `option` when `path`, where a file is to be
    written, is a directory, or its directory cannot be written."""
    if isdir(path):
        raise InputError(f"{option}={path} is a directory; give the name of a file to write", options=(option,))
    check_writable_dir(os.path.dirname(path) or ".", option)


def check_dir_target(path: str, option: str) -> None:
    """Before any work: an `InputError` naming `option` when `path`, where a directory is to be
    written, is a file."""
    if exists(path) and not isdir(path):
        raise InputError(f"{option}={path} is a file; give the name of a directory to write", options=(option,))


def remove(path: str) -> None:
    """Removes the file `path` (nothing when it does not exist)."""
    with contextlib.suppress(FileNotFoundError):
        if is_local(path):
            os.remove(_local(path))
        elif _gfile().exists(path):
            _gfile().remove(path)


def rmtree(path: str) -> None:
    """Removes directory `path` and everything in it (nothing when it does not exist)."""
    if is_local(path):
        shutil.rmtree(_local(path), ignore_errors=True)
    elif _gfile().exists(path):
        _gfile().rmtree(path)


def rename(source: str, target: str) -> None:
    """Renames file `source` over `target` (replacing it); nothing when they are the same (some
    filesystems would delete the file). After a SIGTERM nothing is renamed (`stop_if_terminated`)."""
    if source == target:
        return
    stop_if_terminated()
    if is_local(source) and is_local(target):
        os.replace(_local(source), _local(target))
    else:
        _gfile().rename(source, target, overwrite=True)


def move_tree(source: str, target: str, last: tuple[str, ...] = ()) -> None:
    """Moves directory `source` to `target` (which must not exist). A local directory is renamed
    at once; elsewhere (object stores have no directory rename) each file is copied and the
    source removed, the files named in `last` copied after all others, so that their presence
    says the directory is complete (a SavedModel's `saved_model.pb`)."""
    stop_if_terminated()
    if is_local(source) and is_local(target):
        os.replace(_local(source), _local(target))
        return
    gfile = _gfile()
    files = []
    for directory, _, names in gfile.walk(source):
        files.extend(os.path.join(directory, name) for name in names)
    files.sort(key=lambda path: os.path.basename(path) in last)
    for path in files:
        destination = target + path[len(source):]
        makedirs(os.path.dirname(destination))
        gfile.copy(path, destination, overwrite=True)
    rmtree(source)


def files_under(directory: str) -> list[str]:
    """The paths of the files under `directory` (subdirectories too), relative to it."""
    if is_local(directory):
        return [os.path.relpath(os.path.join(root, name), _local(directory))
                for root, _, files in os.walk(_local(directory)) for name in files]
    return [os.path.join(root, name)[len(directory):].lstrip("/")
            for root, _, files in _gfile().walk(directory) for name in files]


def switch_in(staging: str, target: str, last: tuple[str, ...], stale: Sequence[str] = ()) -> list[str]:
    """Moves the files of directory `staging` (subdirectories too) into `target`, replacing
    files of the same names, and removes `staging`; returns the moved names. The files named in
    `last` (a directory's config) are removed from `target` first and moved in after all the
    others: a process killed between two files leaves `target` without them, a set that every
    reader refuses, never new weights beside an old config that may fit them. The files of
    `target` in `stale` (relative paths: an earlier output's that this one does not replace) are
    removed with them."""
    stop_if_terminated()
    names = files_under(staging)
    makedirs(target)
    for name in [*(n for n in names if os.path.basename(n) in last), *stale]:
        remove(os.path.join(target, name))
    for name in sorted(names, key=lambda n: os.path.basename(n) in last):
        destination = os.path.join(target, name)
        makedirs(os.path.dirname(destination))
        rename(os.path.join(staging, name), destination)
    rmtree(staging)
    return names


def temporary_name(path: str) -> str:
    """A name beside `path` for its content while it is written."""
    return f"{path}.tmp-{os.getpid()}"


def remove_stale_temporaries(path: str) -> list[str]:
    """Removes the `temporary_name(path)` files beside a local `path` whose process is gone (a
    run killed while writing, or one that could not remove them: a full disk); returns them.
    A live process's are left alone, and so are remote ones (their process may be on another
    machine)."""
    if not is_local(path):
        return []
    removed = []
    for name in glob(f"{path}.tmp-*"):
        pid = name.rsplit("-", 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
            remove(name)
            removed.append(name)
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "w") -> Iterator[io.IOBase]:
    """A file object ('w' text, UTF-8, or 'wb') whose content replaces `path` only when the
    `with` block completes; on an error the temporary file is removed and `path` is untouched.
    The parent directory is created."""
    parent = os.path.dirname(path)
    if parent:
        makedirs(parent)
    remove_stale_temporaries(path)
    tmp = temporary_name(path)
    try:
        with open_file(tmp, mode) as f:
            yield f
            if hasattr(f, "fileno"):  # a local file: on the disk before its name is
                f.flush()
                os.fsync(f.fileno())
        rename(tmp, path)
    except BaseException:
        remove(tmp)
        raise
    sync(parent or ".")


def sync(path: str) -> None:
    """Flushes local file or directory `path` to the disk (fsync), so that a power loss after
    it keeps it (a directory: the names in it). Other filesystems store a file when it is
    closed: nothing to do."""
    if not is_local(path):
        return
    with contextlib.suppress(OSError):  # (a filesystem without fsync on directories)
        fd = os.open(_local(path), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_atomic(path: str, data: bytes | str) -> None:
    """Writes `data` (bytes, or text as UTF-8) to `path` atomically (see `atomic_output`)."""
    with atomic_output(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def local_staging_name(path: str) -> str:
    """A local file name to write `path`'s content under before `upload(name, path)`: beside
    `path` when it is local (its directory is created), else a new local temporary file."""
    if is_local(path):
        parent = os.path.dirname(os.path.abspath(_local(path)))
        os.makedirs(parent, exist_ok=True)
        remove_stale_temporaries(_local(path))
        return temporary_name(_local(path))
    fd, name = tempfile.mkstemp(suffix="-" + os.path.basename(path))
    os.close(fd)
    return name


def upload(local_path: str, path: str) -> None:
    """Moves the local file `local_path` to `path` (any filesystem), atomically: a remote target
    is copied under a temporary name beside it and renamed; the local file is removed."""
    if is_local(path):
        os.replace(local_path, _local(path))
        return
    makedirs(os.path.dirname(path))
    tmp = temporary_name(path)
    try:
        _gfile().copy(local_path, tmp, overwrite=True)
        rename(tmp, path)
    except BaseException:
        remove(tmp)
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(local_path)


def create_exclusive(path: str, data: str) -> bool:
    """Writes `data` to `path` only if no file is there; True if this call created it. Atomic
    on a local filesystem (O_EXCL); elsewhere the file is written and read back, and whoever's
    content is there afterwards holds it (object stores have no create-if-absent through gfile)."""
    if is_local(path):
        try:
            fd = os.open(_local(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        return True
    if exists(path):
        return False
    write_atomic(path, data)
    return read_bytes(path).decode("utf-8") == data


def save_figure(figure, path: str, dpi: int = 110) -> None:
    """A matplotlib figure written to `path` atomically, in the format its extension names."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format=os.path.splitext(path)[1].lstrip(".") or "png", dpi=dpi)
    write_atomic(path, buffer.getvalue())
