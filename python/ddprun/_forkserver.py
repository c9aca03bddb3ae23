"""The forkserver template: ddprun's `--start_method=forkserver` (docs/agent-processes.md).

ddprun starts one template per node as `<python> -u -c "...main()" FD PRELOAD`. It imports the
`--preload` modules once, says so on the Unix socket FD (SOCK_SEQPACKET, one JSON message per
packet), then waits. For each worker the agent sends a request (argv, environment, working
directory, CPU placement) with three descriptors: the worker's stdout and stderr pipes and the
read end of a "go" pipe. The template forks twice; the grandchild is reparented to the agent (a
child subreaper), so the agent reaps it like any worker it exec'd. Once its parent is the agent
the worker reports its pid, waits for the agent's go (orphan guard and exit watch in place), and
runs the entry point the way the interpreter would have: a script, `-m` module or `-c` program
in `__main__`, with sys.argv, sys.path[0], os.environ and the working directory of an exec'd
worker. The template never initialises CUDA and starts no thread.
"""

import ctypes
import faulthandler
import io
import json
import os
import platform
import signal
import socket
import sys
import traceback

_MAX_MESSAGE = 1 << 20
_PR_SET_PDEATHSIG = 1
_MPOL_PREFERRED = 1
_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}  # syscall numbers
_libc = ctypes.CDLL(None, use_errno=True)


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


def _serve(sock):
    """Forks a worker per request. Returns (request, fds) in the worker; in the template only
    when the agent closed its end."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 3)
        except InterruptedError:
            continue
        if not data:
            return None
        request = json.loads(data)
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            _send(sock, {"id": request.get("id"), "error": "expected 3 descriptors"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            middle = os.fork()
        except OSError as error:
            _send(sock, {"id": request["id"], "error": "fork: %s" % error.strerror})
            middle = -1
        if middle == 0:
            # The middle process: forks the worker and exits, so that the worker's parent
            # becomes the nearest subreaper (the agent). Both sides set the worker's group.
            try:
                worker = os.fork()
                if worker == 0:
                    return request, fds
                os.setpgid(worker, worker)
            except OSError as error:
                _send(sock, {"id": request["id"], "error": "fork: %s" % error.strerror})
            os._exit(0)
        for fd in fds:
            os.close(fd)
        if middle > 0:
            os.waitpid(middle, 0)


def _become_agents_child(agent_pid):
    """Waits (briefly: the middle process exits at once) until the agent is the parent, then
    dies with it, as an exec'd worker does."""
    while os.getppid() != agent_pid:
        if os.getppid() == 1:
            os._exit(1)  # the agent died or is no subreaper: nobody would supervise us
        os.sched_yield()
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


def _become_worker(sock, request, fds):
    """Everything exec would have given the worker, before its first line runs."""
    os.setpgid(0, 0)
    out, err, go = fds
    _become_agents_child(request["agent_pid"])
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    _send(sock, {"id": request["id"], "pid": os.getpid()})
    sock.close()
    released = os.read(go, 1)
    os.close(go)
    if not released:
        os._exit(1)  # the agent gave up on this start
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(entry.split("=", 1) for entry in request["env"] if "=" in entry)
    _place(request.get("cpus", []), request.get("memory_node", -1))
    _register_stacks()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # a fresh interpreter seeds from the OS; the template's is shared
    sys.orig_argv = list(request["argv"])


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


def main():
    """The template's entry point: sys.argv is ["-c", FD, PRELOAD (comma-separated)]."""
    sock = socket.socket(fileno=int(sys.argv[1]))
    ready = _preload([name for name in sys.argv[2].split(",") if name])
    _send(sock, ready)
    if not ready["ready"]:
        sys.exit(1)
    served = _serve(sock)
    if served is None:
        return  # the agent closed the socket: the template's work is done
    request, fds = served
    _become_worker(sock, request, fds)
    _run_as_main(request["argv"])
