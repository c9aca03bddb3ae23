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
again. Without the agent's channel (--recovery=restart, or torchrun) it only initialises the
group and calls the function once. Standard library and torch only; docs/elastic.md.
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

import torch
import torch.distributed as dist

__all__ = ["RoundChanged", "State", "ObjectState", "TorchState", "current_round", "run"]

_SOCKET_ENV = "DDPRUN_REFORM_SOCKET"
_LOCAL_RANK_ENV = "DDPRUN_REFORM_LOCAL_RANK"

# What the backends say when a peer process or its link is gone (gloo's tcp pair, NCCL after an
# abort, the store client). Other errors are the script's own and propagate.
_PEER_GONE = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|Socket Timeout|"
    r"[Tt]imed out|Connection refused|NCCL communicator was aborted|ncclRemoteError|"
    r"ncclSystemError|ECONNRESET|EPIPE")


class RoundChanged(Exception):
    """Raised by commit() when the agent has announced a new round; run() catches it."""


class _Channel:
    """The worker's end of the agent's hand-over socket (agent/process/reform_channel.hpp)."""

    def __init__(self, address, local_rank):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect("\0" + address[1:] if address.startswith("@") else address)
        self._sock.sendall(f"hello {local_rank} {os.getpid()}\n".encode())
        self._poll = select.poll()
        self._poll.register(self._sock, select.POLLIN)
        self._buffer = b""
        self.latest = None  # the newest place the agent sent: {"round": N, "env": {...}}

    def _read(self, timeout):
        """Reads what has arrived within `timeout` seconds (None: until something does)."""
        # poll, not select: a worker may hold more than FD_SETSIZE (1024) descriptors.
        if not self._poll.poll(None if timeout is None else int(timeout * 1000)):
            return
        data = self._sock.recv(65536)
        if not data:
            raise RuntimeError("ddprun.elastic: the agent closed the hand-over channel")
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            verb, _, body = line.decode().partition(" ")
            if verb == "place":
                place = json.loads(body)
                if self.latest is None or place["round"] > self.latest["round"]:
                    self.latest = place

    def newer_than(self, round_):
        """The latest place if it is for a round after `round_`, without waiting; else None."""
        self._read(0)
        if self.latest is not None and self.latest["round"] > round_:
            return self.latest
        return None

    def wait_newer_than(self, round_):
        """Blocks until the agent hands over a place for a round after `round_`."""
        while self.newer_than(round_) is None:
            self._read(None)
        return self.latest

    def reformed(self, round_):
        self._sock.sendall(f"reformed {round_}\n".encode())


class _Context:
    """The process's recovery state: the channel, the round its group belongs to, the backend."""

    def __init__(self, backend, timeout):
        address = os.environ.get(_SOCKET_ENV, "")
        local_rank = os.environ.get(_LOCAL_RANK_ENV, os.environ.get("LOCAL_RANK", "0"))
        self.channel = _Channel(address, int(local_rank)) if address else None
        self.backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
        self.timeout = timeout
        self.round = -1  # the round of the current process group

    def init_group(self, place):
        """Joins the group of `place`'s round: its variables go into os.environ, its keys under
        a prefix of the round, since torch's env:// prefix stays the same across re-forms."""
        os.environ.update(place["env"])
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                              is_master=False, timeout=self.timeout, wait_for_workers=False)
        prefixed = dist.PrefixStore(f"/ddprun/reform/round_{place['round']}", store)
        dist.init_process_group(self.backend, store=prefixed, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), timeout=self.timeout)
        self.round = place["round"]

    def first_group(self):
        if dist.is_initialized():
            return
        if self.channel is None:
            dist.init_process_group(self.backend, init_method="env://", timeout=self.timeout)
        else:
            self.init_group(self.channel.wait_newer_than(-1))

    def reform(self):
        """Tears the group down and joins the next round's. A failure while joining (a peer
        lost meanwhile) waits for the round after that."""
        while True:
            _destroy_group()
            place = self.channel.wait_newer_than(self.round)
            try:
                self.init_group(place)
                return
            except RuntimeError as error:
                if not _PEER_GONE.search(str(error)):
                    raise
                self.round = place["round"]

    def check_new_round(self):
        if self.channel is not None and self.channel.newer_than(self.round) is not None:
            raise RoundChanged(f"round {self.channel.latest['round']} announced")


_context = None


def current_round():
    """The ddprun round the current process group belongs to; -1 without the agent's channel."""
    return _context.round if _context is not None else -1


def _destroy_group():
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except RuntimeError:
            pass  # a broken group may fail to say goodbye; it is dropped all the same
    # The old group's sockets close when its last reference goes (a DDP reducer in a frame the
    # exception left): peers blocked on them then fail at once instead of at their timeout.
    gc.collect()


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
        self._commits += 1
        self.save()
        if _context is not None:
            _context.check_new_round()

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

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


def run(func=None, *, backend=None, timeout=datetime.timedelta(seconds=300)):
    """Decorator (bare or with arguments) for a function f(state, ...) that trains from `state`.
    backend: default nccl when CUDA is available, else gloo. timeout: the process group's and
    the store's."""

    def decorate(train):
        @functools.wraps(train)
        def wrapper(state, *args, **kwargs):
            global _context
            if _context is None:
                _context = _Context(backend, timeout)
            context = _context
            context.first_group()
            if context.channel is None:
                return train(state, *args, **kwargs)
            while True:
                try:
                    state.sync()  # a peer may die here too: restore() undoes a partial sync
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
