"""The operations PyTorch 2.x's TCPStore client adds to 1.13's (append, multi_get, multi_set,
check, queue_push/queue_pop/queue_len, list_keys, barrier, ...) against a server at HOST PORT,
including blocking queue_pops woken by another client's pushes and a barrier of two clients;
prints one JSON object of outcomes (a value, or the error's type) so that the same run against
ddp-store and against PyTorch's own server can be compared. Operations a client lacks are
recorded as "absent", so it also runs (and compares) under 1.13."""

import datetime
import json
import sys
import threading
import time

from torch.distributed import TCPStore

host, port = sys.argv[1], int(sys.argv[2])


def client(timeout_s=10):
    return TCPStore(host, port, None, False, datetime.timedelta(seconds=timeout_s))


s = client()
out = {}


def record(name, fn):
    try:
        value = fn()
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list):
            value = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
        out[name] = value
    except AttributeError as e:
        out[name] = f"absent: {e}"
    except Exception as e:  # noqa: BLE001 - the outcome itself is what is compared
        out[name] = f"{type(e).__name__}"


record("set", lambda: s.set("a", "1"))
record("append_existing", lambda: s.append("a", "23"))
record("get_appended", lambda: s.get("a"))
record("append_new", lambda: s.append("fresh", "x"))
record("get_fresh", lambda: s.get("fresh"))
record("multi_set", lambda: s.multi_set(["m1", "m2", "m3"], ["v1", "", "v3"]))
record("multi_get", lambda: s.multi_get(["m1", "m2", "m3", "a"]))
record("check_present", lambda: s.check(["m1", "a"]))
record("check_missing", lambda: s.check(["m1", "nope"]))
record("num_keys", lambda: s.num_keys())
record("delete", lambda: s.delete_key("m3"))
record("delete_missing", lambda: s.delete_key("m3"))
record("num_keys_after_delete", lambda: s.num_keys())
record("queue_push1", lambda: s.queue_push("q", "first"))
record("queue_push2", lambda: s.queue_push("q", "second"))
record("queue_len", lambda: s.queue_len("q"))
record("queue_pop", lambda: s.queue_pop("q"))
record("queue_len_after_pop", lambda: s.queue_len("q"))
record("queue_pop_nonblocking_empty",
       lambda: (s.queue_pop("q"), s.queue_pop("q", block=False)))
record("list_keys", lambda: sorted(s.list_keys()))
record("compare_set", lambda: s.compare_set("a", "123", "z"))
record("add", lambda: s.add("n", 41) + s.add("n", 1))
record("has_extended_api", lambda: s.has_extended_api())


def blocking_pop_woken_by_push():
    """queue_pop(block=True) here (WAIT, then QUEUE_POP); another client pushes 0.3 s later."""
    pop, other = s.queue_pop, client()
    pusher = threading.Timer(0.3, lambda: other.queue_push("bq", "late"))
    started = time.monotonic()
    pusher.start()
    try:
        value = pop("bq")
    finally:
        pusher.join()
    return [value.decode(), time.monotonic() - started >= 0.25]


def two_blocking_pops_two_pushes():
    """Two clients block in queue_pop; one push must wake one of them (a server that woke both
    would leave the other to pop an empty queue: QueueEmptyError), the next push the other."""
    push = s.queue_push
    results = []

    def popper():
        try:
            results.append(client().queue_pop("wq").decode())
        except Exception as e:  # noqa: BLE001 - compared as an outcome
            results.append(type(e).__name__)

    threads = [threading.Thread(target=popper) for _ in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    push("wq", "a")
    time.sleep(0.5)
    after_one_push = len(results)
    push("wq", "b")
    for thread in threads:
        thread.join()
    return [after_one_push, sorted(results)]


def call_barrier(store, key, world_size, timeout_s):
    try:
        return store.barrier(key, world_size)
    except TypeError:  # the binding may want the timeout
        return store.barrier(key, world_size, datetime.timedelta(seconds=timeout_s))


def barrier_of_two():
    other = client()
    s.barrier  # noqa: B018 - AttributeError here: "absent"
    thread = threading.Thread(target=call_barrier, args=(other, "bar", 2, 10))
    thread.start()
    call_barrier(s, "bar", 2, 10)
    thread.join()
    # The server's counter under the key (a client-side add+wait barrier leaves none).
    return s.get("bar").decode() if s.check(["bar"]) else "no counter"


def barrier_timeout_then_add():
    """A barrier nobody else joins times out (CANCEL_WAIT); the connection stays usable."""
    alone = client(timeout_s=1)
    alone.barrier  # noqa: B018
    try:
        call_barrier(alone, "bar_alone", 2, 1)
        outcome = "passed"
    except Exception as e:  # noqa: BLE001
        outcome = type(e).__name__
    return [outcome, alone.add("after_barrier_timeout", 1)]


record("queue_pop_blocking_woken_by_push", blocking_pop_woken_by_push)
record("queue_pop_two_blocked_two_pushes", two_blocking_pops_two_pushes)
record("barrier_of_two", barrier_of_two)
record("barrier_timeout_then_add", barrier_timeout_then_add)
print(json.dumps(out, sort_keys=True))
