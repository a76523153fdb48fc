"""The project's scripts in real processes that start in a twentieth of a second.

A test that starts `python SCRIPT FLAGS...` pays Python's and TensorFlow's start-up (about 4.5 s
of CPU) before the script does anything: across the suite that was half of its CPU time. Here
each test process keeps one *fork server*: a process that has imported TensorFlow, Keras and the
project's library modules and has done nothing else (no TensorFlow op has run, so it holds no
thread pool and is safe to fork). A script command is sent to it; it forks, and the child becomes
the script's process: its own pid (a test can SIGTERM or SIGKILL it), its stdin/stdout/stderr the
ones the test asked for, its working directory and environment, `sys.argv` and `__main__` as
`python SCRIPT` would set them, and Python's usual ending (atexit, buffered output flushed, the
exit status or the killing signal as `returncode`).

`Popen` and `run` are `subprocess.Popen` and `subprocess.run`; a command the server cannot stand
for (another program, `-c`, an environment differing in a variable that is read as TensorFlow or
Python start, `preexec_fn`, ...) starts as a plain subprocess. Set SCRIPT_PROCESSES=plain to start
every command plainly (to compare).
"""

import array
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading

# The variables that Python, TensorFlow, Keras, JAX and the numerical libraries read as they
# start or are imported: a command whose environment differs from the server's in one of these
# starts plainly. Any other variable (TF_CONFIG among them: it is read as a run starts) is the
# command's own in the forked process.
READ_AT_START = ("PYTHON", "LD_", "KERAS_", "TF_", "TF2_", "CUDA", "OMP_", "OPENBLAS_", "MKL_", "XLA_", "JAX_",
                 "ONEDNN_", "DNNL_", "TPU_", "HDF5_", "NUMPY_")
READ_AFTER_START = frozenset({"TF_CONFIG"})
# What the scripts set, unless set already, before they import TensorFlow (`runner.run`): the
# server imports TensorFlow under the same.
SCRIPT_DEFAULTS = {"TF_CPP_MIN_LOG_LEVEL": "2"}
# What the server imports before it forks: everything a script imports at its start but its own
# flag definitions (the `cli` modules define absl flags as they are imported).
PACKAGES = ("bert_realformer", "modeling", "tokenization")
NOT_PREIMPORTED = ("bert_realformer.cli", "tokenization.__main__")


class _Server:
    """The fork server of this process, started on first use; it exits when this process ends
    (its stdin, a pipe from here, reaches end of file)."""

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="script-server-")
        self.address = os.path.join(self.directory, "socket")
        self.environment = {**SCRIPT_DEFAULTS, **os.environ}
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__), self.address],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        cwd=os.path.dirname(os.path.abspath(__file__)), env=self.environment)
        ready = self.process.stdout.readline()
        if not ready.startswith(b"ready "):
            raise RuntimeError(f"the script fork server did not start (exit {self.process.wait()})")
        self.set_by_imports = json.loads(ready[len(b"ready "):])

    @classmethod
    def of_parent(cls, address, environment, set_by_imports):
        """The server a forked script process came from (the scripts it starts come from it too)."""
        server = cls.__new__(cls)
        server.address, server.environment, server.set_by_imports = address, environment, set_by_imports
        server.process = None
        return server

    def differences(self, env):
        """Why a command with environment `env` cannot be forked here: [] if it can, else the
        start-up variables it differs in (or that the server has ended)."""
        if self.process is not None and self.process.poll() is not None:
            return ["(the server ended)"]
        env = {**SCRIPT_DEFAULTS, **env}
        # (what importing TensorFlow sets in the environment, a plain script's process gets too)
        same_as_imports = {name for name, value in self.set_by_imports.items() if env.get(name, value) == value}
        return sorted(name for name in set(env) | set(self.environment)
                      if name.startswith(READ_AT_START) and name not in READ_AFTER_START | same_as_imports
                      and env.get(name) != self.environment.get(name))

    def start(self, argv, cwd, env, start_new_session, fds):
        """Forks the script's process; (its pid, the connection its wait status will come on)."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(self.address)
        request = json.dumps({"argv": argv, "cwd": cwd, "env": env, "new_session": start_new_session}).encode()
        connection.sendmsg([request + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
        return int(_read_line(connection)), connection


def _read_line(connection):
    """One line from CONNECTION, read byte by byte (nothing after it is taken off the socket)."""
    line = b""
    while not line.endswith(b"\n"):
        byte = connection.recv(1)
        if not byte:
            raise ConnectionError("the script fork server closed the connection")
        line += byte
    return line


_server = None
_server_lock = threading.Lock()


def _shared_server():
    global _server
    with _server_lock:
        if _server is None or (_server.process is not None and _server.process.poll() is not None):
            _server = _Server()
        return _server


def _forkable(args, executable, preexec_fn, pass_fds, shell):
    if os.environ.get("SCRIPT_PROCESSES") == "plain" or executable or preexec_fn or pass_fds or shell:
        return False
    if isinstance(args, (str, bytes, os.PathLike)) or len(args) < 2 or args[0] != sys.executable:
        return False
    return str(args[1]).endswith(".py") or (args[1] == "-m" and len(args) > 2)


class Popen(subprocess.Popen):
    """`subprocess.Popen`, forked from the fork server when the command is a Python script or
    module run as `python SCRIPT ...` / `python -m MODULE ...`."""

    _status_connection = None
    started_plainly_for = "(not started yet)"  # why the process was not forked; None if it was

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, *rest):
        env = dict(os.environ if env is None else env)
        if not _forkable(args, executable, preexec_fn, pass_fds, shell) or (
                (gid, gids, uid, umask, *rest) != (None, None, None, -1, *[-1] * len(rest))):
            self.started_plainly_for = "not a script command, or options only a plain process has"
        else:
            differences = _shared_server().differences(env)
            self.started_plainly_for = f"the environment differs in {differences}" if differences else None
        if self.started_plainly_for is not None:
            return super()._execute_child(args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                                          creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread,
                                          errwrite, restore_signals, gid, gids, uid, umask, start_new_session,
                                          *rest)
        fds = [fd if fd != -1 else standard for fd, standard in zip((p2cread, c2pwrite, errwrite), (0, 1, 2))]
        try:
            self.pid, self._status_connection = _shared_server().start(
                [os.fspath(arg) for arg in args], os.fspath(cwd) if cwd is not None else os.getcwd(),
                env, bool(start_new_session), fds)
        finally:  # (the child has its copies; ours would keep its pipes open)
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
        self._child_created = True

    def _server_waitpid(self, pid, flags):
        if flags & os.WNOHANG:
            with selectors.DefaultSelector() as ready:
                ready.register(self._status_connection, selectors.EVENT_READ)
                if not ready.select(0):
                    return 0, 0
        status = int(_read_line(self._status_connection))
        self._status_connection.close()
        return pid, status

    def _internal_poll(self, _deadstate=None, **kwargs):
        if self._status_connection is None:
            return super()._internal_poll(_deadstate, **kwargs)
        if self.returncode is None and self._waitpid_lock.acquire(False):  # (as subprocess's own)
            try:
                if self.returncode is None:
                    pid, status = self._server_waitpid(self.pid, os.WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(status)
            except (OSError, ValueError):
                if _deadstate is not None:
                    self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()
        return self.returncode

    def _try_wait(self, wait_flags):
        if self._status_connection is None:
            return super()._try_wait(wait_flags)
        return self._server_waitpid(self.pid, wait_flags)


def run(*popenargs, input=None, capture_output=False, timeout=None, check=False, **kwargs):
    """`subprocess.run` with `Popen` above."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
    completed = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if check:
        completed.check_returncode()
    return completed


# The server's side ----------------------------------------------------------------------------

def _preimport():
    import importlib
    import pkgutil

    import keras  # noqa: F401
    import tensorflow  # noqa: F401
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, package_name + "."):
            if not module.name.startswith(NOT_PREIMPORTED):
                importlib.import_module(module.name)
    # TensorFlow's test combinations (imported with Keras) ask absl to list the GPUs as an app
    # starts; a script imports TensorFlow only after its flags are parsed, so a refusal before
    # that lists none (and prints no CUDA line). The same here.
    from absl import app
    app._init_callbacks.clear()


def _serve(address, environment, set_by_imports):
    """Answers requests until stdin ends; returns (in a forked child only) the request to run."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ, "request")
    events.register(sys.stdin, selectors.EVENT_READ, "end")
    events.register(wakeup_read, selectors.EVENT_READ, "child")
    waiting = {}  # pid -> the connection its status goes to
    sys.stdout.write(f"ready {json.dumps(set_by_imports)}\n")
    sys.stdout.flush()
    while True:
        for key, _ in events.select():
            if key.data == "end":
                return None
            if key.data == "child":
                os.read(wakeup_read, 4096)
                _report_ended(waiting)
                continue
            connection, _ = listener.accept()
            message, ancillary, _, _ = connection.recvmsg(1 << 20, socket.CMSG_SPACE(3 * 4))
            while not message.endswith(b"\n"):
                message += connection.recv(1 << 20)
            fds = array.array("i")
            for level, kind, data in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                events.close()
                listener.close()
                for fd in (wakeup_read, wakeup_write):
                    os.close(fd)
                for other in waiting.values():
                    other.close()
                _become(request, list(fds), connection, set_by_imports)
                _start_scripts_from(_Server.of_parent(address, environment, set_by_imports))
                return request
            for fd in fds:
                os.close(fd)
            connection.sendall(f"{pid}\n".encode())
            waiting[pid] = connection
            _report_ended(waiting)  # (a child may have ended before it was listed)


def _report_ended(waiting):
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = waiting.pop(pid, None)
        if connection is not None:
            try:
                connection.sendall(f"{status}\n".encode())
            except OSError:  # (the test stopped waiting for it)
                pass
            connection.close()


def _become(request, fds, connection, set_by_imports):
    """This forked child takes the script process's standard streams, directory and environment."""
    connection.close()
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({**set_by_imports, **request["env"]})
    argv = request["argv"][1:]
    if argv[0] == "-m":
        sys.argv = argv[1:]
        sys.path[0] = request["cwd"]
    else:
        sys.argv = argv
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))


def _start_scripts_from(server):
    """A script that starts scripts itself (`run_study.py`) has them forked by the same server."""
    global _server
    _server = server
    subprocess.Popen = Popen


def _main(address):
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = dict(os.environ)
    _preimport()
    set_by_imports = {name: value for name, value in os.environ.items() if environment.get(name) != value}
    request = _serve(address, environment, set_by_imports)
    if request is None:  # (the test process has ended)
        os.remove(address)
        os.rmdir(os.path.dirname(address))
    else:
        _end(_run_as_main(request["argv"][1:]))


def _run_as_main(argv):
    """Runs `python ARGV...`'s program in this process; the exit status Python would give."""
    import runpy
    try:
        if argv[0] == "-m":
            sys.modules.pop(argv[1], None)  # (run afresh as __main__, as `python -m` does)
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1
    return 0


def _end(status):
    """Python's ending (threads joined, exit handlers run, output flushed) but for freeing every
    module one by one, which takes a second and a half once TensorFlow is loaded (the operating
    system frees the process's memory as it exits)."""
    import atexit
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


if __name__ == "__main__":
    _main(sys.argv[1])
