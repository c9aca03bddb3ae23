"""issue 29: --recovery=inprocess forks Python workers from the forkserver unless --start_method
(or PET_START_METHOD) is given. Real ddprun, real /usr/bin/python3 + PyTorch workers (the probe
records whether torch was already imported at its first line):
- --recovery=inprocess alone: one 'forkserver ready' line, both workers find torch imported;
- with --start_method=spawn, or PET_START_METHOD=spawn: exec, torch not imported, no template;
- --recovery=restart alone: exec, as before;
- the implied template that cannot start (a --preload module that does not exist) warns and
  execs instead of failing the launch; asked for with --start_method=forkserver, it fails."""
import os

import ddptest
import fstest

INPROCESS = ["--recovery=inprocess", "--nproc_per_node=2"]


def run_probe(tmp, name, args, env=None, code=0):
    out = os.path.join(tmp, name)
    os.mkdir(out)
    # info: the template's 'forkserver ready' line
    result, _ = fstest.launch(["--log_level=info"] + args + [fstest.PROBE, out, "--mode", "exit",
                                                             "--arg", "0"], timeout=120, env=env)
    fstest.expect_exit(result, code, name)
    return result, fstest.probes(out)


def check_forked(tmp, name, args, env=None):
    result, records = run_probe(tmp, name, args, env)
    ddptest.check(sorted(records) == [0, 1], f"{name}: probe records of ranks {sorted(records)}")
    ddptest.check(all(r["torch_at_first_line"] for r in records.values()),
                  f"{name}: a worker was exec'd (torch not imported at its first line)")
    ddptest.check(len(fstest.ready_lines(result.stderr)) == 1,
                  f"{name}: no 'forkserver ready' line:\n{result.stderr}")
    print(f"{name}: both workers forked from the template")


def check_execd(tmp, name, args, env=None):
    result, records = run_probe(tmp, name, args, env)
    ddptest.check(sorted(records) == [0, 1], f"{name}: probe records of ranks {sorted(records)}")
    ddptest.check(not any(r["torch_at_first_line"] for r in records.values()),
                  f"{name}: a worker found torch imported at its first line (forked)")
    ddptest.check(not fstest.ready_lines(result.stderr),
                  f"{name}: a template started:\n{result.stderr}")
    return result


def main():
    ddptest.require_torch()
    tmp = ddptest.temp_dir("ddp_inprocess_default_")
    try:
        check_forked(tmp, "inprocess", INPROCESS)
        check_forked(tmp, "PET_RECOVERY", ["--nproc_per_node=2"], {"PET_RECOVERY": "inprocess"})
        check_execd(tmp, "inprocess_spawn", INPROCESS + ["--start_method=spawn"])
        check_execd(tmp, "inprocess_PET_START_METHOD", INPROCESS, {"PET_START_METHOD": "spawn"})
        check_execd(tmp, "restart", ["--nproc_per_node=2"])
        print("an explicit start method, or restart recovery: exec")

        result = check_execd(tmp, "implied_fallback",
                             INPROCESS + ["--preload=ddp_no_such_module_29"])
        warning = [line for line in result.stderr.splitlines()
                   if "cannot import module 'ddp_no_such_module_29'" in line]
        ddptest.check(len(warning) == 1 and "[warning]" in warning[0]
                      and "--start_method=spawn" in warning[0],
                      f"the implied template's failure must be one warning:\n{result.stderr}")
        result, _ = run_probe(tmp, "asked_fails", INPROCESS + [
            "--start_method=forkserver", "--preload=ddp_no_such_module_29"], code=1)
        ddptest.check("cannot import module 'ddp_no_such_module_29'" in result.stderr,
                      f"an asked-for template's failure must name the module:\n{result.stderr}")
        print("a template that cannot start: exec with a warning when implied, exit 1 when asked")
    finally:
        ddptest.remove_tree(tmp)


main()
