"""The steps of scripts/gpu/check.sh (which sets up the carried binaries, libraries and data, then
runs this with the interpreter that holds PyTorch). Each step records pass/fail/skip, its seconds,
its figures and the tail of its output; everything goes into OUT/gpu-check.json, a short
OUT/gpu-check.txt summary and the full OUT/gpu-check.log. Without a GPU only the steps that need
none run (a rehearsal), and the summary says "no GPU".
Usage: gpu_check.py OUT_DIR   (environment from check.sh: DDP_BIN_DIR, DDP_DATA_DIR, DDP_SOURCE_DIR)
Exit: 0 every step that ran passed; 1 a step failed."""

import json
import os
import re
import signal
import subprocess
import sys
import time

BIN = os.environ["DDP_BIN_DIR"]
DATA = os.environ["DDP_DATA_DIR"]
ROOT = os.environ["DDP_SOURCE_DIR"]
BUDGET_S = float(os.environ.get("DDP_GPU_CHECK_BUDGET_S", "450"))  # check.sh's 8 minutes, less setup
BATCHES = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
SWEEP_EPOCHS = 3  # per batch size, each side; the first step of each run is left out of samples/s
START = time.monotonic()
PY = sys.executable


class Check:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.steps = {}
        self.log = open(os.path.join(out_dir, "gpu-check.log"), "w", encoding="utf-8")

    def run(self, cmd, timeout, env=None):
        """Runs cmd (output captured and logged); returns (rc, output). rc 124 on timeout."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        left = BUDGET_S - (time.monotonic() - START)
        timeout = max(5, min(timeout, left))
        self.log.write(f"$ {' '.join(cmd)}\n")
        self.log.flush()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=full_env, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the whole group: ddprun and its workers
            out, _ = p.communicate()
            rc = 124
            out += f"\n[timed out after {timeout:.0f}s]\n"
        self.log.write(out + f"[rc={rc}]\n\n")
        self.log.flush()
        return rc, out

    def step(self, name, fn):
        """Runs one step; fn returns (status, figures, detail). An exception fails the step."""
        if time.monotonic() - START > BUDGET_S - 10:
            self.steps[name] = {"status": "skip", "detail": "out of time", "seconds": 0}
            print(f"{name}: skip (out of time)", flush=True)
            return
        begin = time.monotonic()
        try:
            status, figures, detail = fn()
        except Exception as e:  # noqa: BLE001 - a broken step is a failed step, the rest still run
            status, figures, detail = "fail", {}, f"{type(e).__name__}: {e}"
        self.steps[name] = {"status": status, "seconds": round(time.monotonic() - begin, 1),
                            "figures": figures, "detail": detail}
        print(f"{name}: {status} ({self.steps[name]['seconds']}s) {detail}", flush=True)


def tail(text, lines=15):
    return "\n".join(text.strip().splitlines()[-lines:])


def summary_fields(text):
    """The key=value fields of the last `summary ...` line (ddp-train's and torch_mlp_ddp's)."""
    lines = [l for l in text.splitlines() if l.startswith("summary ")]
    return dict(f.split("=", 1) for f in lines[-1].split()[1:] if "=" in f) if lines else {}


def ddprun(nproc, *args):
    return [os.path.join(BIN, "ddprun"), f"--nproc_per_node={nproc}", *args]


def train_cmd(nproc, device, *args):
    backend = "nccl" if device == "cuda" else "gloo"
    return ddprun(nproc, "--no_python", os.path.join(BIN, "ddp-train"), "--data", DATA,
                  "--device", device, "--backend", backend, "--log_every", "100000", *args)


# What the GPU machine's own system provides (glibc and the compiler runtime); every other library
# must come from the carried folder (DDP_CARRIED_LIB, through the RPATH pack.sh set) or
# LD_LIBRARY_PATH (CUDA's), or it would be missing there.
SYSTEM_LIBS = ("linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "libpthread.so",
               "librt.so", "libstdc++.so", "libgcc_s.so")


def step_ldd(c):
    dirs = [os.environ.get("DDP_CARRIED_LIB", "/nonexistent")]
    dirs += [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    problems = {}
    for name in sorted(os.listdir(BIN)):
        rc, out = c.run(["ldd", os.path.join(BIN, name)], 30)
        bad = []
        for line in out.splitlines():
            parts = line.split()
            if "not found" in line:
                bad.append(f"{parts[0]} not found")
            elif len(parts) >= 3 and parts[1] == "=>" and not parts[0].startswith(SYSTEM_LIBS) \
                    and not any(os.path.realpath(parts[2]).startswith(os.path.realpath(d) + "/")
                                for d in dirs):
                bad.append(f"{parts[0]} only from the system ({parts[2]})")
        if rc != 0 or bad:
            problems[name] = bad or [tail(out, 2)]
    if problems:
        return "fail", {"problems": problems}, f"libraries not carried: {problems}"
    return "pass", {"binaries": len(os.listdir(BIN))}, \
        "every carried binary's libraries resolve to the carried folder, CUDA's or glibc's"


def count_gpus(c):
    rc, out = c.run([os.path.join(BIN, "runtime_worker"), "cuda-devices"], 60)
    match = re.search(r"=(\d+)", out)
    gpus = int(match.group(1)) if rc == 0 and match else 0
    name = ""
    if gpus:
        rc, out = c.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                         "--format=csv,noheader"], 30)
        name = out.strip().splitlines()[0] if rc == 0 and out.strip() else ""
    return gpus, name


def step_gpu_tests(c):
    """The ctest label gpu, run as ctest runs each test (its environment), from this tree."""
    env = {"DDP_SOURCE_DIR": ROOT, "PYTHONPATH": os.path.join(ROOT, "tests/integration"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    tests = {"runtime_gpu_ops_1": ("tests/integration/runtime/runtime_test.py", ["gpu-ops", "1"], 240),
             "train_gpu": ("tests/integration/train/train_gpu_test.py", [], 300)}
    results, failed = {}, []
    for name, (script, args, timeout) in tests.items():
        rc, out = c.run([PY, os.path.join(ROOT, script), *args], timeout, env)
        results[name] = {0: "pass", 77: "skip"}.get(rc, f"fail (rc={rc})")
        if rc != 0:  # a skip on a machine with a GPU is a failure too
            failed.append(f"{name}: {results[name]}: {tail(out, 3)}")
    return ("fail" if failed else "pass"), results, "; ".join(failed) or "both pass"


def step_epoch(c, gpus):
    """One epoch on the CPU engine and (with a GPU) one under --nproc_per_node=gpu on CUDA."""
    figures = {}
    cpu_args = ["--epochs", "1"] if gpus else ["--max_steps", "30"]
    rc, out = c.run(train_cmd(1, "cpu", *cpu_args), 240)
    f = summary_fields(out)
    if rc != 0 or not f:
        return "fail", figures, f"cpu run rc={rc}: {tail(out, 3)}"
    figures["cpu"] = {k: f[k] for k in ("steps", "test_accuracy", "samples_per_s")}
    if not gpus:
        return "pass", figures, f"cpu engine (30 steps) test_accuracy={f['test_accuracy']}"
    rc, out = c.run(train_cmd("gpu", "cuda", "--epochs", "1"), 180)
    g = summary_fields(out)
    if rc != 0 or not g:
        return "fail", figures, f"cuda run rc={rc}: {tail(out, 3)}"
    figures["cuda"] = {k: g[k] for k in ("steps", "device", "world_size", "test_accuracy",
                                         "samples_per_s")}
    diff = abs(float(g["test_accuracy"]) - float(f["test_accuracy"]))
    figures["accuracy_difference"] = round(diff, 4)
    # Same data and seed; one rank each when there is one GPU, so only rounding separates them.
    bound = 0.01 if g["world_size"] == "1" else 0.02
    status = "pass" if diff <= bound else "fail"
    return status, figures, (f"cuda {g['test_accuracy']} vs cpu {f['test_accuracy']} "
                             f"(|diff| {diff:.4f}, bound {bound})")


def step_allreduce(c, gpus):
    rows = {}
    for world in sorted({1, gpus}):
        rc, out = c.run(ddprun(world, "--no_python", os.path.join(BIN, "ddp-bench"), "allreduce",
                               "--mode", "nccl", "--sizes", "4K..1G", "--json", "--check"), 240)
        lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        if rc != 0 or not lines:
            return "fail", rows, f"world {world} rc={rc}: {tail(out, 3)}"
        rows[f"world_{world}"] = [{k: l[k] for k in ("size_bytes", "time_us", "time_us_median",
                                                     "algbw_gbps", "busbw_gbps", "check")}
                                  for l in lines]
    last = rows[f"world_{max(1, gpus)}"][-1]
    return "pass", rows, (f"{len(rows)} world size(s), largest {last['size_bytes']} B: "
                          f"{last['time_us']:.0f} us, algbw {last['algbw_gbps']:.1f} GB/s")


def step_sgemm(c):
    rc, out = c.run([os.path.join(BIN, "ddp-bench"), "sgemm", "--json",
                     "--batch_sizes", ",".join(map(str, BATCHES))], 120)
    lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    if rc != 0 or not lines:
        return "fail", {}, f"rc={rc}: {tail(out, 3)}"
    rows = {str(l["batch_size"]): {k: l[k] for k in ("gflops", "step_us", "gemm_only_samples_per_s")}
            for l in lines}
    top = rows[str(BATCHES[-1])]
    return "pass", rows, f"batch {BATCHES[-1]}: {top['gflops']:.0f} GFLOP/s"


def step_sweep(c, roofline):
    """ddp-train (CUDA, 1 rank) and PyTorch DDP (NCCL, torchrun, 1 rank) per batch size."""
    rows, problems = {}, []
    for b in BATCHES:
        rc, out = c.run(train_cmd(1, "cuda", "--epochs", str(SWEEP_EPOCHS), "--batch_size", str(b)),
                        120)
        f = summary_fields(out)
        if rc != 0 or not f:
            problems.append(f"ddp-train batch {b} rc={rc}: {tail(out, 2)}")
            continue
        rows[str(b)] = {"ddp_train_samples_per_s": float(f["samples_per_s"]),
                        "ddp_train_test_accuracy": float(f["test_accuracy"])}
    rc, out = c.run([PY, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
                     os.path.join(ROOT, "scripts/bench/torch_mlp_ddp.py"), "--device", "cuda",
                     "--data", DATA, "--epochs", str(SWEEP_EPOCHS),
                     "--batch_sizes", ",".join(map(str, BATCHES))], 240)
    torch_lines = [l for l in out.splitlines() if l.startswith("summary ")]
    if rc != 0 or not torch_lines:
        problems.append(f"PyTorch DDP rc={rc}: {tail(out, 3)}")
    for line in torch_lines:
        f = dict(x.split("=", 1) for x in line.split()[1:] if "=" in x)
        row = rows.setdefault(f["batch_size"], {})
        row["pytorch_samples_per_s"] = float(f["samples_per_s"])
        row["pytorch_test_accuracy"] = float(f["test_accuracy"])
    for b, row in rows.items():
        if "ddp_train_samples_per_s" in row and "pytorch_samples_per_s" in row:
            row["ratio_vs_pytorch"] = round(row["ddp_train_samples_per_s"] /
                                            row["pytorch_samples_per_s"], 3)
        if b in roofline and "ddp_train_samples_per_s" in row:
            row["fraction_of_gemm_roofline"] = round(
                row["ddp_train_samples_per_s"] / roofline[b]["gemm_only_samples_per_s"], 3)
    top = rows.get(str(BATCHES[-1]), {})
    detail = "; ".join(problems) or (
        f"batch {BATCHES[-1]}: ddp-train/PyTorch {top.get('ratio_vs_pytorch')}, "
        f"of roofline {top.get('fraction_of_gemm_roofline')}")
    return ("fail" if problems else "pass"), rows, detail


def step_torch_workers(c, gpus):
    runs = [("gloo", 2)] + ([("nccl", 1)] if gpus else [])
    figures, problems = {}, []
    for backend, world in runs:
        rc, out = c.run(ddprun(world, f"--python={PY}",
                               os.path.join(ROOT, "scripts/gpu/torch_worker.py"), backend), 120)
        ok = len([l for l in out.splitlines() if l.startswith("worker ") and l.endswith(" ok")])
        figures[f"{backend}_world_{world}"] = "ok" if rc == 0 and ok == world else f"rc={rc}"
        if rc != 0 or ok != world:
            problems.append(f"{backend} world {world}: rc={rc}, {ok} ranks ok: {tail(out, 3)}")
    rc, out = c.run([PY, "-c", "import torch; print(torch.__version__)"], 60)
    figures["torch"] = out.strip().splitlines()[-1] if rc == 0 else "none"
    return ("fail" if problems else "pass"), figures, "; ".join(problems) or str(figures)


def step_store(c):
    rc, out = c.run([PY, os.path.join(ROOT, "scripts/gpu/store_compare.py"),
                     os.path.join(BIN, "ddp-store")], 180)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    if rc != 0 or not report:
        return "fail", report, f"rc={rc}: {tail(out, 5)}"
    return "pass", report, (f"torch {report['torch']}: {report['operations']} outcomes equal "
                            "against ddp-store and PyTorch's server")


def step_script(c, script, timeout, args=()):
    """A script of scripts/gpu that prints one JSON line and exits 0 when its checks hold
    (inprocess_cuda.py, forkserver_cuda.py), run with `args`."""
    rc, out = c.run([PY, os.path.join(ROOT, "scripts/gpu", script), *args], timeout)
    lines = [l for l in out.splitlines() if l.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    if rc != 0 or not report:
        return "fail", report, f"rc={rc}: {tail(out, 5)}"
    return "pass", report, json.dumps(report)[:300]


def have_torch(c):
    rc, _ = c.run([PY, "-c", "import torch.distributed"], 60)
    return rc == 0


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    c = Check(out_dir)
    c.step("ldd", lambda: step_ldd(c))
    gpus, gpu_name = count_gpus(c)
    torch_ok = have_torch(c)
    if torch_ok:
        c.step("torch_workers", lambda: step_torch_workers(c, gpus))
        c.step("store_torch_client", lambda: step_store(c))
        # Without a GPU: forkserver_cuda.py rehearses on the CPU by itself, inprocess_cuda.py when
        # told (--cpu).
        c.step("forkserver_cuda", lambda: step_script(c, "forkserver_cuda.py", 70))
        c.step("inprocess_cuda",
               lambda: step_script(c, "inprocess_cuda.py", 100, () if gpus else ("--cpu",)))
    else:
        for name in ("torch_workers", "store_torch_client", "forkserver_cuda", "inprocess_cuda"):
            c.steps[name] = {"status": "skip", "detail": f"{PY} cannot import torch", "seconds": 0}
    if gpus:
        c.step("gpu_tests", lambda: step_gpu_tests(c))
    c.step("epoch_cpu_vs_cuda", lambda: step_epoch(c, gpus))
    # libddp's NCCL abort (ddp-train --recovery=inprocess): one NCCL rank per GPU, so two GPUs.
    if gpus >= 2:
        c.step("inprocess_nccl_train",
               lambda: step_script(c, "inprocess_nccl_train.py", 150))
    else:
        c.steps["inprocess_nccl_train"] = {"status": "skip", "seconds": 0,
                                           "detail": f"needs 2 GPUs, found {gpus}"}
    if gpus:
        c.step("sgemm_roofline", lambda: step_sgemm(c))
        c.step("allreduce_nccl", lambda: step_allreduce(c, gpus))
        roofline = c.steps.get("sgemm_roofline", {}).get("figures", {})
        c.step("throughput_vs_pytorch", lambda: step_sweep(c, roofline))
    failed = [n for n, s in c.steps.items() if s["status"] == "fail"]
    report = {"version": 1, "mode": "gpu" if gpus else "no-gpu rehearsal", "gpus": gpus,
              "gpu": gpu_name, "python": PY, "seconds": round(time.monotonic() - START, 1),
              "passed": not failed, "steps": c.steps}
    with open(os.path.join(out_dir, "gpu-check.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    lines = [f"gpu-check: {report['mode']}: {gpus} GPU(s) {gpu_name}".rstrip()]
    lines += [f"  {n}: {s['status']} ({s['seconds']}s) {str(s.get('detail', ''))[:300]}"
              for n, s in c.steps.items()]
    if not gpus:
        lines.append("no GPU: only the steps that need none ran (rehearsal)")
    lines.append("FAILED: " + ", ".join(failed) if failed else "all steps that ran passed")
    with open(os.path.join(out_dir, "gpu-check.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
