"""Drives kill_rank.py: one rank of a DeepSpeed ZeRO-3 job through mcr dies with SIGKILL in the
middle of a step; every survivor must raise within MCR_TIMEOUT (plus --slack for scheduling on a
loaded machine), and every process must end: nothing may hang.

    fault.py store NPROC VICTIM PYTHON KILL_RANK_PY [kill_rank.py options]
    fault.py mpirun NPROC VICTIM MPIEXEC PYTHON KILL_RANK_PY [kill_rank.py options]

store   ranks started here with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
        MASTER_PORT): mcr forms its world through torch's store and runs on Gloo alone. Unlike
        torchrun, this launcher leaves the survivors running, so that they must end on their own.
mpirun  Open MPI with --enable-recovery, so that mpirun does not end the job when the victim
        dies: mcr has MPI and Gloo and selects as usual, and only mcr can end the survivors.
        (orte_abort_on_non_zero_status=0 leaves them running too, but Open MPI 4.1's mpirun then
        never returns once a process that did not call MPI_Finalize exits with a non-zero
        status, which is how a survivor leaves after an abandoned MPI operation.)

MCR_TIMEOUT must be set (the bound); --job-timeout bounds the whole run.
"""

import os
import re
import socket
import subprocess
import sys
import tempfile
import time

LINE = re.compile(r"^(?:\[\d+\] )?kill_rank: rank (\d+) raised (\w+) after ([0-9.]+) s "
                  r"at step (\d+): (.*)$", re.M)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_store(nproc, rest, job_timeout):
    env = dict(os.environ, WORLD_SIZE=str(nproc), LOCAL_WORLD_SIZE=str(nproc),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    procs, outs = [], []
    for r in range(nproc):
        out = tempfile.TemporaryFile(mode="w+")
        procs.append(subprocess.Popen(rest, stdout=out, stderr=subprocess.STDOUT,
                                      env=dict(env, RANK=str(r), LOCAL_RANK=str(r))))
        outs.append(out)
    deadline = time.monotonic() + job_timeout
    hung = []
    for r, p in enumerate(procs):
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung.append(r)
    for r in hung:
        procs[r].kill()
        procs[r].wait()
    text = ""
    for r, out in enumerate(outs):
        out.seek(0)
        text += "".join(f"[{r}] {line}" for line in out)
    return text, {r: p.returncode for r, p in enumerate(procs)}, hung


def run_mpirun(nproc, mpiexec, rest, job_timeout):
    cmd = [mpiexec, "--enable-recovery", "--oversubscribe",
           "--bind-to", "none", "--allow-run-as-root", "--mca", "mpi_yield_when_idle", "1",
           "--mca", "btl", "self,vader", "-np", str(nproc)] + rest
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        text, _ = p.communicate(timeout=job_timeout)
        return text, {"mpirun": p.returncode}, []
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        text, _ = p.communicate()
        return text, {"mpirun": p.returncode}, ["mpirun"]


def main():
    argv = sys.argv[1:]
    # The whole run's bound stays under ctest's (120 s): killed by ctest first, this script never
    # printed the ranks' output nor which of them still ran.
    slack, job_timeout = 1.5, 90.0
    while argv and argv[0].startswith("--"):
        if argv[0] == "--slack":
            slack = float(argv[1])
        elif argv[0] == "--job-timeout":
            job_timeout = float(argv[1])
        else:
            sys.exit(f"fault.py: unknown option {argv[0]}")
        argv = argv[2:]
    mode, nproc, victim = argv[0], int(argv[1]), int(argv[2])
    timeout = float(os.environ["MCR_TIMEOUT"])
    stamp = tempfile.mktemp(prefix="mcr-ds-kill-")
    extra = ["--victim", str(victim), "--stamp", stamp]
    began = time.monotonic()
    if mode == "store":
        text, status, hung = run_store(nproc, argv[3:] + extra, job_timeout)
    elif mode == "mpirun":
        text, status, hung = run_mpirun(nproc, argv[3], argv[4:] + extra, job_timeout)
    else:
        sys.exit(f"fault.py: unknown mode {mode}")
    wall = time.monotonic() - began
    print(text)
    print(f"---- fault.py: {mode} np={nproc} victim={victim} MCR_TIMEOUT={timeout:g} s: "
          f"exit status {status}, {wall:.1f} s", flush=True)
    failures = []
    if hung:
        failures.append(f"still running after {job_timeout:g} s (killed): {hung}")
    if not os.path.exists(stamp):
        failures.append(f"rank {victim} did not die where it should")
    else:
        os.unlink(stamp)
    if mode == "store" and status.get(victim) != -9:
        failures.append(f"rank {victim} ended with {status.get(victim)}, not SIGKILL")
    if f"kill_rank: rank {victim} kills itself" not in text:
        failures.append(f"rank {victim} did not say it killed itself")
    if "no error" in text:
        failures.append("a survivor finished its steps without an error")
    seen = {int(m.group(1)): m for m in LINE.finditer(text)}
    for r in range(nproc):
        if r == victim:
            continue
        m = seen.get(r)
        if m is None:
            failures.append(f"rank {r} printed no error")
            continue
        after = float(m.group(3))
        if after > timeout + slack:
            failures.append(f"rank {r} raised after {after:.2f} s, beyond MCR_TIMEOUT "
                            f"{timeout:g} s + {slack:g} s")
        if mode == "store" and status.get(r) != 3:
            failures.append(f"rank {r} exited with {status.get(r)}, not 3 (raised)")
    if failures:
        for f in failures:
            print(f"FAIL: {f}")
        sys.exit(1)
    print("fault.py: PASSED: every survivor raised within "
          + ", ".join(f"{float(seen[r].group(3)):.2f} s" for r in sorted(seen)))


if __name__ == "__main__":
    main()
