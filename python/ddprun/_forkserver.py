"""The forkserver template: ddprun's `--start_method=forkserver` (docs/agent-processes.md).

ddprun starts one template per node as `<python> -u -c "...main()" FD PRELOAD`. It imports the
`--preload` modules once, says so on the Unix socket FD (SOCK_SEQPACKET, one JSON message per
packet), then waits. For each worker the agent sends a request (argv, environment, working
directory, CPU placement) with three descriptors: the worker's stdout and stderr pipes and the
read end of a "go" pipe. Each worker must be the agent's child, so that the agent reaps it like a
worker it exec'd. With one thread in the template, each is forked straight as the agent's child
(clone with CLONE_PARENT; a new worker forks half of the launch's remaining workers the same way
before it runs) and its pid reported at once; otherwise (a BLAS pool running, which
only a fork that runs the pthread_atfork handlers may copy) the template forks a middle process,
which forks one worker per request waiting and exits, and the workers are reparented to the agent
(a child subreaper). Each worker waits for the agent's go (orphan guard and exit watch in place),
and runs the entry point the way the interpreter would have: a script, `-m` module or `-c`
program in `__main__`, with sys.argv, sys.path[0], os.environ and the working directory of an
exec'd worker. The template never initialises CUDA and starts no thread.
"""

import array
import ctypes
import faulthandler
import gc
import io
import json
import os
import platform
import signal
import socket
import sys
import threading
import traceback

_MAX_MESSAGE = 1 << 20
_MAX_BATCH = 256
_PR_SET_PDEATHSIG = 1
_MPOL_PREFERRED = 1
_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}  # syscall numbers
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.pthread_self.restype = ctypes.c_void_p
_COMMAND_LINE = None  # (address, size) of the process's command line, set by main()
# The template forks a launch's first workers as leaves, so they run at once (no worker waits on
# forks of others before its first line); every later one forks half of those still waiting.
_LEAVES_FIRST = 2


class _ForkAsAgentsChild:
    """fork() whose child is the template's parent's (the agent's) child: the raw clone system
    call with CLONE_PARENT, wrapped as os.fork wraps fork(): the interpreter's before/after-fork
    hooks (import lock, GIL, threading, os.register_at_fork) run around it. What glibc's fork()
    does besides, for a process of one thread, is done here: the kernel writes the child's id into
    the thread descriptor (CLONE_CHILD_SETTID, at the address found by value: where this thread's
    id is, exactly once in the descriptor's first KiB), and the child registers the robust futex
    list again (the kernel drops it at clone). The pthread_atfork handlers do not run: callers
    use it only while the template has one thread, so no handler has a pool to stop.
    usable() is False where any of this is missing; the template then forks a middle process."""

    _CLONE_PARENT = 0x00008000
    _CLONE_CHILD_SETTID = 0x01000000
    # (clone, get_robust_list, set_robust_list); clone's argument order differs by architecture
    _SYSCALLS = {"x86_64": (56, 274, 273), "aarch64": (220, 100, 99)}

    def __init__(self):
        self.numbers = self._SYSCALLS.get(platform.machine())
        self.tid_address = self._find_tid_address() if self.numbers else None
        self.robust_head, self.robust_length = self._robust_list() if self.numbers else (0, 0)

    def usable(self):
        return self.tid_address is not None and self.robust_head != 0

    @staticmethod
    def _find_tid_address():
        try:
            base = _libc.pthread_self()
            words = (ctypes.c_int * 256).from_address(base)
        except (AttributeError, ValueError, TypeError):
            return None
        tid = threading.get_native_id()
        found = [index for index, word in enumerate(words) if word == tid]
        return base + 4 * found[0] if len(found) == 1 else None

    def _robust_list(self):
        head, length = ctypes.c_void_p(), ctypes.c_size_t()
        if _libc.syscall(ctypes.c_long(self.numbers[1]), ctypes.c_long(0), ctypes.byref(head),
                         ctypes.byref(length)) != 0:
            return 0, 0
        return head.value or 0, length.value

    def fork(self):
        """os.fork(), the child being the agent's. Raises OSError."""
        clone, _, set_robust_list = self.numbers
        flags = ctypes.c_ulong(self._CLONE_PARENT | self._CLONE_CHILD_SETTID | signal.SIGCHLD)
        tid = ctypes.c_ulong(self.tid_address)
        zero = ctypes.c_ulong(0)
        ctypes.pythonapi.PyOS_BeforeFork()
        if platform.machine() == "x86_64":  # clone(flags, stack, parent_tid, child_tid, tls)
            pid = _libc.syscall(ctypes.c_long(clone), flags, zero, zero, tid, zero)
        else:  # clone(flags, stack, parent_tid, tls, child_tid)
            pid = _libc.syscall(ctypes.c_long(clone), flags, zero, zero, zero, tid)
        error = ctypes.get_errno()
        if pid == 0:
            _libc.syscall(ctypes.c_long(set_robust_list), ctypes.c_void_p(self.robust_head),
                          ctypes.c_size_t(self.robust_length))
            ctypes.pythonapi.PyOS_AfterFork_Child()
            return 0
        ctypes.pythonapi.PyOS_AfterFork_Parent()
        if pid < 0:
            raise OSError(error, os.strerror(error))
        return pid


def _send(sock, message):
    sock.send(json.dumps(message).encode())


def _preload(modules):
    """Imports every module; returns the ready message (or the one-line error)."""
    for name in modules:
        try:
            __import__(name)
        except BaseException as error:  # a module may raise anything, SystemExit included
            text = "".join(traceback.format_exception_only(type(error), error)).strip()
            return {"version": 1, "ready": False,
                    "error": "cannot import module '%s': %s" % (name, text.splitlines()[-1])}
    torch = sys.modules.get("torch")
    cuda = bool(torch is not None and torch.cuda.is_initialized())
    return {"version": 1, "ready": True, "pid": os.getpid(), "cuda_initialized": cuda,
            "threads": len(os.listdir("/proc/self/task"))}


def _receive(sock, flags=0):
    """One request and its descriptors; None at EOF. Raises BlockingIOError with MSG_DONTWAIT
    when none is waiting."""
    while True:
        try:
            # Not socket.recv_fds: Python 3.11's ignores its flags argument.
            data, ancillary, _, _ = sock.recvmsg(_MAX_MESSAGE, socket.CMSG_SPACE(3 * 4), flags)
        except InterruptedError:
            continue
        if not data:
            return None
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        return json.loads(data), list(fds)


def _receive_batch(sock):
    """The requests the agent has sent: it sends a launch's requests before awaiting any answer,
    so one middle process usually forks every worker of the launch. None at EOF."""
    first = _receive(sock)
    if first is None:
        return None
    batch = [first]
    while len(batch) < _MAX_BATCH:
        try:
            more = _receive(sock, socket.MSG_DONTWAIT)
        except BlockingIOError:
            break
        if more is None:
            break
        batch.append(more)
    for request, fds in list(batch):
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            batch.remove((request, fds))
            _send(sock, {"id": request.get("id"), "error": "expected 3 descriptors"})
    return batch


def _fork_workers(batch, report):
    """In the middle process: forks a worker per request and writes their pids to `report`.
    Returns (request, fds) in a worker; never returns in the middle process itself."""
    replies = []
    for index, (request, fds) in enumerate(batch):
        try:
            pid = os.fork()
        except OSError as error:
            replies.append({"id": request["id"], "error": "fork: %s" % error.strerror})
            continue
        if pid == 0:
            os.close(report)
            for other, (_, other_fds) in enumerate(batch):
                if other != index:
                    for fd in other_fds:
                        os.close(fd)
            return request, fds
        try:
            os.setpgid(pid, pid)  # the worker does it too: whichever runs first
        except OSError:
            pass
        replies.append({"id": request["id"], "pid": pid, "middle": True})
    os.write(report, json.dumps(replies).encode())
    os._exit(0)


def _close_all(requests):
    for _, fds in requests:
        for fd in fds:
            os.close(fd)


def _fork_direct(sock, batch, forker):
    """Forks each worker of `batch` as the agent's child and reports its pid at once, so the
    agent releases the first while the others are forked. The forks make a tree: each new worker
    first forks half of the requests still waiting (as the agent's children too), then runs, so a
    launch of n workers takes about log2(n) forks of the template's size on enough cores instead
    of n one after another. Returns ((request, fds), []) in a worker; in the template (None, the
    requests left): none when all were served, else from a clone the kernel refused (a seccomp
    filter, say), after which the template forks through a middle process."""
    mine = None  # in a worker: its own request, run once its share is forked
    pending = list(batch)
    leaves = _LEAVES_FIRST
    while pending:
        (request, fds), rest = pending[0], pending[1:]
        if mine is None and leaves > 0:  # the template's first forks run at once
            kept, handed = rest, []
            leaves -= 1
        else:
            kept, handed = rest[:len(rest) // 2], rest[len(rest) // 2:]
        try:
            pid = forker.fork()
        except OSError as error:
            forker.tid_address = None
            if mine is None:
                return None, pending
            for refused, _ in pending:  # a worker forking its share: no middle process here
                _send(sock, {"id": refused["id"], "error": "clone: %s" % error.strerror})
            _close_all(pending)
            break
        if pid == 0:
            _close_all(kept + ([mine] if mine is not None else []))
            mine, pending = (request, fds), handed
            continue
        _close_all([(request, fds)] + handed)
        _send(sock, {"id": request["id"], "pid": pid, "middle": False})
        pending = kept
    return mine, []


def _one_thread():
    return len(os.listdir("/proc/self/task")) == 1


def _serve(sock):
    """Forks the workers of each batch of requests. Returns (request, fds) in a worker; in the
    template only when the agent closed its end."""
    forker = _ForkAsAgentsChild()
    while True:
        batch = _receive_batch(sock)
        if batch is None:
            return None
        if not batch:
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        if forker.usable() and _one_thread():
            served, batch = _fork_direct(sock, batch, forker)
            if served is not None:
                return served
            if not batch:
                continue
        read_end, write_end = os.pipe()
        try:
            middle = os.fork()
        except OSError as error:
            middle = -1
            replies = [{"id": r["id"], "error": "fork: %s" % error.strerror} for r, _ in batch]
        if middle == 0:
            os.close(read_end)
            return _fork_workers(batch, write_end)
        os.close(write_end)
        for _, fds in batch:
            for fd in fds:
                os.close(fd)
        if middle > 0:
            # Once the middle process is reaped every worker's parent is the agent (the nearest
            # subreaper): only then do the pids go out, so the agent always reaps its own child.
            os.waitpid(middle, 0)
            data = os.read(read_end, _MAX_MESSAGE)
            replies = json.loads(data) if data else [
                {"id": r["id"], "error": "the middle process failed"} for r, _ in batch]
        os.close(read_end)
        for reply in replies:
            _send(sock, reply)


def _start_as_agents_child(agent_pid):
    """Dies with the agent, as an exec'd worker does. The agent is the parent already (the pid
    went out after the middle process was reaped) unless it died since."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != agent_pid:
        os._exit(1)


def _place(cpus, memory_node):
    """--numa_binding: the CPU mask must hold (as for exec); the memory policy is best effort."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    number = _SET_MEMPOLICY.get(platform.machine())
    if memory_node >= 0 and number is not None:
        words = memory_node // 64 + 1
        mask = (ctypes.c_ulong * words)()
        mask[memory_node // 64] = 1 << (memory_node % 64)
        _libc.syscall(number, _MPOL_PREFERRED, mask, ctypes.c_ulong(words * 64 + 1))


def _register_stacks():
    """ddprun's stack signal into this worker's own file (the sitecustomize hook ran in the
    template, which had no DDPRUN_STACK_DIR)."""
    number = int(os.environ.get("DDPRUN_STACK_SIGNAL", "0") or "0")
    directory = os.environ.get("DDPRUN_STACK_DIR", "")
    if number <= 0 or not os.path.isdir(directory):
        return
    path = os.path.join(directory, "python-%d.txt" % os.getpid())
    global _stack_stream
    _stack_stream = open(path, "ab", buffering=0)
    faulthandler.register(number, file=_stack_stream, all_threads=True, chain=False)


def _command_line_area():
    """(address, size) of this process's command line in its memory (/proc/self/stat's arg_start
    and arg_end, fields 48 and 49), or None where that is not known."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()  # from field 3 on
        start, end = int(fields[45]), int(fields[46])
    except (OSError, ValueError, IndexError):
        return None
    return (start, end - start) if end > start else None


def _show_command_line(words, area):
    """Makes ps, top, pgrep -f and /proc/PID/cmdline show `words` (NUL-separated, cut to the
    room the process started with, the rest NULs) instead of the template's command."""
    if area is None:
        return
    start, size = area
    data = b"\0".join(os.fsencode(word) for word in words)[:size - 1]
    ctypes.memmove(start, data + b"\0" * (size - len(data)), size)


def _become_worker(sock, request, fds):
    """Everything exec would have given the worker, before its first line runs."""
    os.setpgid(0, 0)
    out, err, go = fds
    sock.close()
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    released = os.read(go, 1)
    os.close(go)
    if not released:
        os._exit(1)  # the agent gave up on this start, or died
    _start_as_agents_child(request["agent_pid"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(entry.split("=", 1) for entry in request["env"] if "=" in entry)
    _place(request.get("cpus", []), request.get("memory_node", -1))
    _register_stacks()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # a fresh interpreter seeds from the OS; the template's is shared
    sys.orig_argv = list(request["argv"])
    _show_command_line(request["argv"], _COMMAND_LINE)


def _fresh_main(filename):
    """Empties __main__ as the interpreter prepares it for a script (or -c when None)."""
    import builtins
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(__name__="__main__", __doc__=None, __package__=None, __spec__=None,
                __annotations__={}, __builtins__=builtins)
    if filename is not None:
        import importlib.machinery
        main["__loader__"] = importlib.machinery.SourceFileLoader("__main__", filename)
        main["__file__"] = filename
        main["__cached__"] = None
    return main


def _run(argv):
    """Runs `<python> -u (script | -m module | -c program) args` in this process."""
    rest = argv[2:]
    if rest[0] == "-m":
        import runpy
        sys.argv = ["-m"] + rest[2:]
        sys.path[0] = os.getcwd()
        runpy._run_module_as_main(rest[1], alter_argv=True)
    elif rest[0] == "-c":
        sys.argv = ["-c"] + rest[2:]
        sys.path[0] = ""
        exec(compile(rest[1], "<string>", "exec"), _fresh_main(None))
    else:
        path = os.path.abspath(rest[0])
        sys.argv = list(rest)
        sys.path[0] = os.path.dirname(os.path.realpath(path))
        try:
            with io.open_code(path) as stream:
                source = stream.read()
        except OSError as error:
            print("%s: can't open file %r: [Errno %d] %s"
                  % (argv[0], path, error.errno, error.strerror), file=sys.stderr)
            sys.exit(2)
        exec(compile(source, path, "exec"), _fresh_main(path))


def _run_as_main(argv):
    """_run, ending as the interpreter ends: SystemExit and KeyboardInterrupt go up to it; any
    other exception prints its traceback (without this module's frames) and exits 1."""
    try:
        _run(argv)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as error:
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        sys.excepthook(type(error), error.with_traceback(tb), tb)
        sys.exit(1)


def _exit_status(code):
    """The exit status the interpreter gives `sys.exit(code)`: None is 0, an integer is itself,
    anything else is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except Exception:
        pass
    return 1


def _end_as_the_interpreter_would(status, template_modules):
    """Ends the worker with what the interpreter's own exit does that user code can see: other
    non-daemon threads joined, atexit handlers run, the objects of the worker's own modules
    (__main__ and every module imported after the fork) freed so their __del__ runs and files
    left open are flushed and closed, then stdout and stderr flushed. The template's modules are
    not torn down: their objects live on pages shared with the template, and freeing them copies
    every page (a third of a second with torch loaded) for nothing a worker could observe."""
    threading._shutdown()
    import atexit
    atexit._run_exitfuncs()
    for name in reversed(list(sys.modules)):
        if name == "__main__" or name not in template_modules:
            module = sys.modules.get(name)
            if module is not None and name != __name__:
                builtins = module.__dict__.get("__builtins__")
                module.__dict__.clear()
                if builtins is not None:
                    module.__dict__["__builtins__"] = builtins
    gc.collect()
    for thing in gc.get_objects():  # the frozen template's objects are not listed
        if isinstance(thing, io.IOBase) and thing not in (sys.stdout, sys.stderr):
            try:
                if not thing.closed:
                    thing.close()
            except Exception:
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            status = status or 120  # the interpreter's status when flushing stdout fails
    os._exit(status)


def _run_then_end(argv, template_modules):
    """Runs the worker's entry point and ends the process; KeyboardInterrupt goes up to the
    interpreter, which ends by SIGINT as it would have."""
    try:
        _run_as_main(argv)
        status = 0
    except SystemExit as exit_:
        status = _exit_status(exit_.code)
    _end_as_the_interpreter_would(status, template_modules)


def main():
    """The template's entry point: sys.argv is ["-c", FD, PRELOAD (comma-separated), ROOM], ROOM
    being spaces that make room in the process's command line for a worker's (shown by ps)."""
    global _COMMAND_LINE
    _COMMAND_LINE = _command_line_area()
    _show_command_line(sys.orig_argv[:-1], _COMMAND_LINE)
    sock = socket.socket(fileno=int(sys.argv[1]))
    ready = _preload([name for name in sys.argv[2].split(",") if name])
    _send(sock, ready)
    if not ready["ready"]:
        sys.exit(1)
    # Objects the imports made go to the permanent generation: a collection in a worker then
    # never walks (and so never copies on write) the template's pages (Python's pre-fork advice).
    gc.collect()
    gc.freeze()
    served = _serve(sock)
    if served is None:
        return  # the agent closed the socket: the template's work is done
    request, fds = served
    template_modules = set(sys.modules)
    _become_worker(sock, request, fds)
    _run_then_end(request["argv"], template_modules)
