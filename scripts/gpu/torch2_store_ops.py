"""The operations PyTorch 2.x's TCPStore client adds to 1.13's (append, multi_get, multi_set,
check, queue_push/queue_pop/queue_len, list_keys, ...) against a server at HOST PORT; prints one
JSON object of outcomes (a value, or the error's type and message) so that the same run against
ddp-store and against PyTorch's own server can be compared. Operations a client lacks are
recorded as "absent", so it also runs (and compares) under 1.13."""

import datetime
import json
import sys

from torch.distributed import TCPStore

host, port = sys.argv[1], int(sys.argv[2])
s = TCPStore(host, port, None, False, datetime.timedelta(seconds=10))
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
print(json.dumps(out, sort_keys=True))
