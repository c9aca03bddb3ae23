"""ddprun.elastic: in-process recovery for PyTorch workers (ddprun --recovery=inprocess).

The surface follows Horovod elastic::

    import ddprun.elastic as elastic
    state = elastic.TorchState(model=model, optimizer=opt, step=0)  # extra fields as kwargs

    @elastic.run
    def train(state):
        ddp = DDP(state.model)                  # built again after each re-form
        for step in range(state.step, total_steps):
            ...one step...
            state.step = step + 1               # what the next entry starts from
            state.commit()                      # in-memory snapshot; cheap

    train(state)

`run` initialises the process group on first entry. When a collective fails because a peer is
gone, or the agent announces a new round (checked at commit(), so a joining node is taken in at
a step boundary), it restores the last commit, tears the group down, waits for this worker's new
place from the agent, initialises the group again, brings every rank to the newest commit (the
rank with the most commits sends model, optimizer and extra fields) and calls the function
again. A worker whose main thread is blocked (a collective with a peer whose link is cut, an
init waiting for a peer that died) cannot take its new place: a thread that reads the channel
then writes the last commit to a file of this local rank's and ends the process with
GIVE_UP_EXIT; the agent starts it again in the same round and the new process loads that file
at its first entry. Without the agent's channel (--recovery=restart, or torchrun) it only
initialises the group and calls the function once. Standard library and torch only;
docs/elastic.md.
"""

import copy
import datetime
import functools
import gc
import json
import os
import re
import select
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist

__all__ = ["RoundChanged", "State", "ObjectState", "TorchState", "current_round", "run"]

_SOCKET_ENV = "DDPRUN_REFORM_SOCKET"
_LOCAL_RANK_ENV = "DDPRUN_REFORM_LOCAL_RANK"
_STATE_DIR_ENV = "DDPRUN_REFORM_STATE_DIR"  # where a worker that gives up leaves its commit

# One try at connecting to a round's store, and the pause between tries (connect_store()).
_STORE_TRY = datetime.timedelta(seconds=1)
_STORE_RETRY_PAUSE = 0.1

# The exit code of a worker that gave up its place (EX_TEMPFAIL): its commit is in its file.
GIVE_UP_EXIT = 75
# How long a place waits for a main thread blocked past its grace (see _Channel).
_BLOCKED_WAIT_S = 0.5

# What the backends say when a peer process or its link is gone (gloo's tcp pair, NCCL after an
# abort, the store client). Other errors are the script's own and propagate.
_PEER_GONE = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|Socket Timeout|"
    r"[Tt]imed out|Connection refused|NCCL communicator was aborted|ncclRemoteError|"
    r"ncclSystemError|ECONNRESET|EPIPE|[Aa]bort")


class RoundChanged(Exception):
    """Raised by commit() when the agent has announced a new round; run() catches it."""


class _Channel:
    """The worker's end of the agent's hand-over socket (agent/process/reform_channel.hpp). A
    daemon thread reads it, so places arrive while the main thread is blocked in C++ (torch
    releases the GIL in collectives' and the store's waits). While it trains, the main thread
    commits at least every `grace` seconds (grace is longer than a step), so a new place is due
    `grace` after its last commit, or _BLOCKED_WAIT_S (at most `grace`) after its arrival if
    that is later: a main thread already blocked for `grace` (in a collective with a peer whose
    link was cut until the peer's loss was judged) is not waited for a whole grace again, but
    one blocked on a peer whose process has just ended is freed within that wait: the ranks next
    to the peer fail at once and close their sockets as they re-form, which fails the rest. From
    a place taken (or the process's start) to its next commit it forms a group, which waits for
    peers as long as they take: a place arriving then is due `grace` after its arrival. When the newest place is overdue,
    the thread frees the main thread with `abort(round)` where `may_abort(round)` (an NCCL
    group), which then gets another `grace` seconds; else it calls `give_up(round)`, which ends
    the process."""

    def __init__(self, address, local_rank, grace, may_abort, abort, give_up):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect("\0" + address[1:] if address.startswith("@") else address)
        self._sock.sendall(f"hello {local_rank} {os.getpid()}\n".encode())
        self._poll = select.poll()
        self._poll.register(self._sock, select.POLLIN)
        self._buffer = b""
        self._grace = grace
        self._may_abort = may_abort
        self._abort = abort
        self._give_up = give_up
        self._changed = threading.Condition()
        self.latest = None  # the newest place the agent sent: {"round": N, "env": {...}}
        self._due = 0.0  # when the main thread must have taken `latest` (time.monotonic())
        self._progress = time.monotonic()  # the main thread's last commit or place taken
        self._waiting = False  # the main thread waits for a place (it takes one at once)
        self._forming = True  # the main thread took a place and has not committed since
        self._taken = -1  # the newest round the main thread took a place of
        self._closed = False
        self._giving_up = False
        threading.Thread(target=self._serve, name="ddprun-elastic", daemon=True).start()

    def _serve(self):
        try:
            while True:
                with self._changed:
                    overdue = self._overdue()
                if overdue == 0.0:
                    with self._changed:
                        if self._overdue() != 0.0:  # the main thread took it meanwhile
                            continue
                        round_ = self.latest["round"]
                        self._giving_up = not self._may_abort(round_)
                    if self._giving_up:
                        self._give_up(round_)
                        return
                    self._abort(round_)
                    with self._changed:
                        self._due = time.monotonic() + self._grace
                    continue
                self._read(overdue)
        except (OSError, RuntimeError, ValueError) as error:
            with self._changed:
                self._closed = str(error) or type(error).__name__
                self._changed.notify_all()

    def _overdue(self):
        """Seconds left until the newest place is overdue (0.0: it is); None: nothing waits."""
        if self.latest is None or self.latest["round"] <= self._taken:
            return None
        return max(0.0, self._due - time.monotonic())

    def _read(self, timeout):
        """Reads what has arrived within `timeout` seconds (None: until something does)."""
        # poll, not select: a worker may hold more than FD_SETSIZE (1024) descriptors.
        if not self._poll.poll(None if timeout is None else max(1, int(timeout * 1000))):
            return
        data = self._sock.recv(65536)
        if not data:
            raise RuntimeError("the agent closed the hand-over channel")
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            verb, _, body = line.decode().partition(" ")
            if verb == "place":
                place = json.loads(body)
                with self._changed:
                    if self.latest is None or place["round"] > self.latest["round"]:
                        self.latest = place
                        now = time.monotonic()
                        if self._waiting or self._forming:
                            self._due = now + self._grace
                        else:  # blocked past its grace: a short wait, not none (see above)
                            self._due = max(now + min(self._grace, _BLOCKED_WAIT_S),
                                            self._progress + self._grace)
                        self._changed.notify_all()

    def _check_open(self):
        if self._closed:
            raise RuntimeError(f"ddprun.elastic: the hand-over channel failed: {self._closed}")

    def progressed(self):
        """On the main thread: it committed (so it is not blocked)."""
        self._progress = time.monotonic()
        self._forming = False

    def newer_than(self, round_):
        """The latest place if it is for a round after `round_`, without waiting; else None."""
        with self._changed:
            self._check_open()
            if self.latest is not None and self.latest["round"] > round_:
                return self.latest
            return None

    def wait_newer_than(self, round_):
        """Blocks until the agent hands over a place for a round after `round_`; takes it."""
        with self._changed:
            self._waiting = True
            try:
                while True:
                    self._check_open()
                    if self._giving_up:  # the process ends in a moment; its place is given up
                        self._changed.wait()
                    elif self.latest is not None and self.latest["round"] > round_:
                        self._taken = self.latest["round"]
                        self._progress = time.monotonic()
                        self._forming = True
                        return self.latest
                    else:
                        self._changed.wait()
            finally:
                self._waiting = False

    def reformed(self, round_):
        self._sock.sendall(f"reformed {round_}\n".encode())


class _Context:
    """The process's recovery state: the channel, the round its group belongs to, the backend."""

    def __init__(self, backend, timeout, grace):
        address = os.environ.get(_SOCKET_ENV, "")
        local_rank = int(os.environ.get(_LOCAL_RANK_ENV, os.environ.get("LOCAL_RANK", "0")))
        state_dir = os.environ.get(_STATE_DIR_ENV, "")
        self.commit_file = (os.path.join(state_dir, f"elastic_commit_{local_rank}.pt")
                            if state_dir else None)
        self.state = None  # the State that run() trains; what give_up() saves
        self.channel = (_Channel(address, local_rank, grace, self.may_abort, self.abort_group,
                                 self.give_up) if address else None)
        self.aborted_round = -1  # the newest round whose place made this worker abort its group
        self.backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        self.timeout = timeout
        self.round = -1  # the round of the current process group

    def init_group(self, place):
        """Joins the group of `place`'s round: its variables go into os.environ, its keys under
        a prefix of the round, since torch's env:// prefix stays the same across re-forms."""
        os.environ.update(place["env"])
        store = self.connect_store(place["round"], os.environ["MASTER_ADDR"],
                                   int(os.environ["MASTER_PORT"]))
        prefixed = dist.PrefixStore(f"/ddprun/reform/round_{place['round']}", store)
        dist.init_process_group(self.backend, store=prefixed, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=self.timeout)
        self.round = place["round"]

    def connect_store(self, round_, host, port):
        """A client of round `round_`'s store, reached in tries of _STORE_TRY: torch's TCPStore
        holds the GIL while it retries a refused connection, so one try of the whole timeout
        (a store whose host left the round) would keep the channel's thread from reading a
        newer place or giving the process up. Between tries, a newer place ends the wait with
        a peer-gone error (the round is over); past the timeout, an error of its own."""
        deadline = time.monotonic() + self.timeout.total_seconds()
        while True:
            try:
                store = dist.TCPStore(host, port, is_master=False, timeout=_STORE_TRY,
                                      wait_for_workers=False)
                store.set_timeout(self.timeout)
                return store
            except (RuntimeError, OSError) as error:  # 1.13 raises TimeoutError, an OSError
                if self.channel is not None and self.channel.newer_than(round_) is not None:
                    raise RuntimeError(f"ddprun.elastic: the store of round {round_} at "
                                       f"{host}:{port} is gone (Connection refused); a newer "
                                       f"round is announced") from error
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"ddprun.elastic: no store at {host}:{port} for round "
                                       f"{round_} within {self.timeout}") from error
                time.sleep(_STORE_RETRY_PAUSE)

    def first_group(self):
        if dist.is_initialized():
            return
        if self.channel is None:
            dist.init_process_group(self.backend, init_method="env://", timeout=self.timeout)
        else:
            self.join_newest()

    def reform(self):
        """Tears the group down and joins the next round's."""
        _destroy_group()
        self.join_newest()

    def join_newest(self):
        """Joins the group of the newest place after this worker's round. A failure while
        joining (a peer or the round's store gone meanwhile: the round is over) waits for the
        round after that; so does a newcomer's first join."""
        while True:
            place = self.channel.wait_newer_than(self.round)
            try:
                self.init_group(place)
                return
            except RuntimeError as error:
                if not _PEER_GONE.search(str(error)):
                    raise
                self.round = place["round"]
                _destroy_group()  # an init that failed in its barrier left its group behind

    def may_abort(self, round_):
        """Whether a main thread that missed round `round_`'s place is freed by aborting the
        group (NCCL, once per round, where torch can) rather than by giving the process up."""
        return _overdue_action(self.backend, self.aborted_round >= round_,
                               _nccl_abort()) == "abort"

    def abort_group(self, round_):
        """On the channel's thread: aborts the NCCL group, so that a collective blocked on a
        dead peer returns with an error; the main thread then re-forms."""
        self.aborted_round = round_
        sys.stderr.write(f"ddprun.elastic: blocked past the hand-over of round {round_}; "
                         f"aborting the NCCL group\n")
        sys.stderr.flush()
        try:
            _nccl_abort()()
        except RuntimeError as error:  # a group torn down meanwhile: nothing is blocked on it
            sys.stderr.write(f"ddprun.elastic: the abort failed: {error}\n")

    def give_up(self, round_):
        """On the channel's thread: the main thread did not take round `round_`'s place in
        time. Leaves the last commit in commit_file (atomically) and ends the process at once:
        its agent starts it again in that round, and the new process resumes from the file."""
        saved = "no commit file"
        try:
            if self.state is not None and self.commit_file is not None:
                with _commit_lock:
                    snapshot = self.state.snapshot()
                # A partial file under another name, then a rename: a reader sees the whole
                # previous file or the whole new one.
                partial = f"{self.commit_file}.{os.getpid()}.tmp"
                torch.save(snapshot, partial)
                os.replace(partial, self.commit_file)
                saved = f"{snapshot['commits']} commits saved to {self.commit_file}"
        except Exception as error:  # the process ends all the same; its peers hold the state
            saved = f"the commit could not be saved: {error}"
        sys.stderr.write(f"ddprun.elastic: blocked past the hand-over of round {round_}; "
                         f"ending with {GIVE_UP_EXIT} to be started again ({saved})\n")
        sys.stderr.flush()
        os._exit(GIVE_UP_EXIT)

    def resume(self, state):
        """At the first entry: loads what a predecessor of this local rank left in
        commit_file. Returns whether there was one."""
        if self.commit_file is None or not os.path.exists(self.commit_file):
            return False
        with _commit_lock:
            state.load_snapshot(torch.load(self.commit_file))
        state.restore()
        return True

    def check_new_round(self):
        if self.channel is None:
            return
        self.channel.progressed()
        if self.channel.newer_than(self.round) is not None:
            raise RoundChanged(f"round {self.channel.latest['round']} announced")


_context = None
# Held while a State's snapshot changes, so that give_up() never saves half of one.
_commit_lock = threading.Lock()


def current_round():
    """The ddprun round the current process group belongs to; -1 without the agent's channel."""
    return _context.round if _context is not None else -1


def _nccl_abort():
    """A function that aborts the default group's NCCL communicators, so that a collective
    blocked on a dead peer returns with an error; None where this torch has none (1.13)."""
    c10d = dist.distributed_c10d
    abort_group = getattr(c10d, "_abort_process_group", None)  # torch 2.x
    if abort_group is not None:
        return abort_group
    if not dist.is_initialized():
        return None
    try:  # torch 2.x without the function: the NCCL backend object of the default group
        backend = c10d._get_default_group()._get_backend(torch.device("cuda"))
    except (AttributeError, RuntimeError, ValueError):
        return None
    return backend.abort if hasattr(backend, "abort") else None


def _overdue_action(backend, aborted_already, abort):
    """What a worker whose main thread missed its new place does: "abort" its NCCL group once,
    where this torch can (`abort` not None); else "give_up" its process (gloo, whose blocked
    collectives have no abort in torch; torch 1.13; an abort that did not free the thread)."""
    if backend == "nccl" and abort is not None and not aborted_already:
        return "abort"
    return "give_up"


def _destroy_group():
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except RuntimeError:
            pass  # a broken group may fail to say goodbye; it is dropped all the same
    _reset_group_count()
    # The old group's sockets close when its last reference goes (a DDP reducer in a frame the
    # exception left): peers blocked on them then fail at once instead of at their timeout.
    gc.collect()


def _reset_group_count():
    """Zeroes torch's count of the groups this process made, as destroying the default group
    does. The count names init_process_group's store barrier key, and torch counts a group
    before it is built: an init that failed while building it (a peer or the store gone) leaves
    the count one up, and the next init's barrier would wait on a key its peers never add."""
    c10d = dist.distributed_c10d
    world = getattr(c10d, "_world", None)
    if world is not None and hasattr(type(world), "group_count"):  # torch 2.x
        world.group_count = 0
    elif hasattr(c10d, "_group_count"):  # torch 1.13
        c10d._group_count = 0


def _device(backend):
    return torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else "cpu"


class State:
    """What survives a re-form: commit() snapshots it, restore() returns to the snapshot, sync()
    makes every rank's copy that of the rank with the most commits."""

    def __init__(self):
        self._commits = 0

    @property
    def commits(self):
        """How many commits this state has seen (after a sync: the sender's count)."""
        return self._commits

    def commit(self):
        """Snapshots the state, then raises RoundChanged if the agent announced a new round."""
        with _commit_lock:
            self._commits += 1
            self.save()
        if _context is not None:
            _context.check_new_round()

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def snapshot(self):
        """The last commit as a dict torch.save() can write (with the commit count)."""
        return {"commits": self._commits}

    def load_snapshot(self, snapshot):
        """Makes a snapshot() of another process this state's last commit (restore() then
        returns to it)."""
        self._commits = snapshot["commits"]

    def sync(self):
        """Collective: finds the rank with the most commits (the lowest such rank) and makes
        every rank's state its copy. Returns that rank."""
        device = _device(_context.backend if _context else dist.get_backend())
        counts = [torch.zeros(1, dtype=torch.int64, device=device)
                  for _ in range(dist.get_world_size())]
        dist.all_gather(counts, torch.tensor([self._commits], dtype=torch.int64, device=device))
        counts = [int(c.item()) for c in counts]
        root = counts.index(max(counts))
        self.broadcast(root)
        with _commit_lock:
            self._commits = counts[root]
            self.save()
        return root


class ObjectState(State):
    """Plain fields (kwargs), deep-copied on commit and sent pickled on sync."""

    def __init__(self, **fields):
        super().__init__()
        self._fields = list(fields)
        for name, value in fields.items():
            setattr(self, name, value)
        self._saved = {}
        self.save()

    def save(self):
        self._saved = {name: copy.deepcopy(getattr(self, name)) for name in self._fields}

    def restore(self):
        for name, value in self._saved.items():
            setattr(self, name, copy.deepcopy(value))

    def snapshot(self):
        return dict(super().snapshot(), fields=self._saved)

    def load_snapshot(self, snapshot):
        super().load_snapshot(snapshot)
        self._saved = snapshot["fields"]

    def broadcast(self, root):
        box = [{name: getattr(self, name) for name in self._fields}]
        dist.broadcast_object_list(box, src=root)
        for name, value in box[0].items():
            setattr(self, name, value)


class TorchState(ObjectState):
    """A model and an optimizer (either may be None) plus plain fields. The model's tensors are
    broadcast in place, the optimizer's state pickled."""

    def __init__(self, model=None, optimizer=None, **fields):
        self.model = model
        self.optimizer = optimizer
        self._model_saved = None
        self._optimizer_saved = None
        super().__init__(**fields)

    def save(self):
        if self.model is not None:
            self._model_saved = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        if self.optimizer is not None:
            self._optimizer_saved = copy.deepcopy(self.optimizer.state_dict())
        super().save()

    def restore(self):
        if self.model is not None:
            self.model.load_state_dict(self._model_saved)
        if self.optimizer is not None:
            self.optimizer.load_state_dict(copy.deepcopy(self._optimizer_saved))
        super().restore()

    def snapshot(self):
        return dict(super().snapshot(), model=self._model_saved, optimizer=self._optimizer_saved)

    def load_snapshot(self, snapshot):
        self._model_saved = snapshot["model"]
        self._optimizer_saved = snapshot["optimizer"]
        super().load_snapshot(snapshot)

    def broadcast(self, root):
        if self.model is not None:
            with torch.no_grad():
                for tensor in self.model.state_dict().values():
                    dist.broadcast(tensor, src=root)
        if self.optimizer is not None:
            box = [self.optimizer.state_dict()]
            dist.broadcast_object_list(box, src=root)
            if dist.get_rank() != root:
                self.optimizer.load_state_dict(box[0])
        super().broadcast(root)


def run(func=None, *, backend=None, timeout=datetime.timedelta(seconds=300), grace=1.0):
    """Decorator (bare or with arguments) for a function f(state, ...) that trains from `state`.
    backend: default nccl when CUDA is available, else gloo. timeout: the process group's and
    the store's. grace: seconds a new place may wait for the main thread (it takes one at a
    commit, or when a collective fails) before the worker gives up its process, counted from the
    main thread's last commit (or the place's arrival, if later); longer than a step."""

    def decorate(train):
        @functools.wraps(train)
        def wrapper(state, *args, **kwargs):
            global _context
            if _context is None:
                _context = _Context(backend, timeout, grace)
            context = _context
            context.state = state
            resumed = context.channel is not None and context.resume(state)
            context.first_group()
            if context.channel is None:
                return train(state, *args, **kwargs)
            while True:
                try:
                    state.sync()  # a peer may die here too: restore() undoes a partial sync
                    if resumed:  # the group holds that commit, or a newer one, now
                        os.remove(context.commit_file)
                        resumed = False
                    context.channel.reformed(context.round)
                    return train(state, *args, **kwargs)
                except RoundChanged:
                    pass
                except RuntimeError as error:
                    if not _PEER_GONE.search(str(error)):
                        raise
                state.restore()
                context.reform()

        return wrapper

    return decorate(func) if func is not None else decorate
