#!/usr/bin/env python3
"""What a trainer built on train_cli.h promises when it is stopped or goes wrong.

    reliability_test.py TRAINER WORKDIR interrupt   SIGTERM and SIGINT: the step ends, the run
                                                    saves, says so and exits 143 / 130; the
                                                    checkpoint resumes bit for bit; a second
                                                    signal exits at once
    reliability_test.py TRAINER WORKDIR kill        SIGKILL at seeded random moments, resumed
                                                    each time: every checkpoint left behind
                                                    is whole and loads, and the losses equal an
                                                    uninterrupted run's bit for bit
    reliability_test.py TRAINER WORKDIR nonfinite   a NaN loss: --on-nonfinite stop names the
                                                    step, skip drops the update and goes on,
                                                    --detect-anomaly names the op

    reliability_test.py TRAINER WORKDIR mpi_interrupt MPIEXEC ARGS...
                                                    SIGTERM to rank 1 of 2 alone: both ranks
                                                    stop after the same step, rank 0 saves it,
                                                    and 2 ranks resume it bit for bit

Python 3 standard library only. Exits 1 naming what failed.
"""

import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import time

# A tiny model with dropout under a per-op checkpoint policy, so a resume has
# both random numbers and recompute to get right.
TINY = ["--hidden", "32", "--layers", "2", "--heads", "2", "--kv-heads", "1",
        "--intermediate", "64", "--batch", "2", "--seq", "32", "--threads", "1",
        "--dropout", "0.1", "--checkpoint-policy", "op-sac", "--log-every", "1",
        "--eval-every", "0", "--eval-batches", "1"]
KILL_SEED = 20261203
KILLS = 40
STATE = "train_state.safetensors"


def fail(message):
    print("FAIL: " + message, flush=True)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def run(trainer, args, expect_status=0, launcher=()):
    """Runs the trainer to its end; returns its output (stdout and stderr)."""
    p = subprocess.run(list(launcher) + [trainer] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=600)
    check(p.returncode == expect_status,
          f"{' '.join(args)}: status {p.returncode}, expected {expect_status}\n{p.stdout}")
    return p.stdout


def losses(metrics_path):
    """[(step, loss, grad_norm)] of a --metrics file, as the JSON text holds them
    (each session's {"config": ...} line skipped)."""
    with open(metrics_path, encoding="utf-8") as f:
        return [(m["step"], m["loss"], m["grad_norm"]) for m in map(json.loads, f) if "step" in m]


def start(trainer, args, launcher=()):
    return subprocess.Popen(list(launcher) + [trainer] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)


def read_until(process, pattern):
    """Reads the process's output up to a line matching `pattern`; returns the text."""
    text = ""
    for line in process.stdout:
        text += line
        if re.search(pattern, line):
            return text
    process.wait()
    fail(f"exited ({process.returncode}) before a line matching '{pattern}':\n{text}")


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def checkpoint_step(folder):
    """The step of the checkpoint in `folder` after checking that the file is whole:
    a safetensors header whose tensors tile the rest of the file exactly, and the
    training-state JSON matching its recorded hash. None when there is none."""
    path = os.path.join(folder, STATE)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        data = f.read()
    check(len(data) >= 8, f"{path}: {len(data)} bytes, shorter than a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
              default=0)
    check(8 + n + end == len(data), f"{path}: {len(data)} bytes, the header describes {8 + n + end}")
    meta = header["__metadata__"]
    text = meta["reprise.train_state"]
    check(int(meta["reprise.train_state.fnv1a64"], 16) == fnv1a64(text.encode()),
          f"{path}: the state JSON does not match its hash")
    return json.loads(text)["step"]


def temporaries(folder):
    return [f for f in os.listdir(folder) if ".tmp" in f] if os.path.isdir(folder) else []


def fresh(workdir, name):
    path = os.path.join(workdir, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def test_interrupt(trainer, workdir):
    d = fresh(workdir, "interrupt")
    steps = ["--steps", "40"]
    run(trainer, TINY + steps + ["--metrics", f"{d}/straight.jsonl"])
    for sig, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        name = signal.Signals(sig).name
        save, metrics = f"{d}/{name}", f"{d}/{name}.jsonl"
        p = start(trainer, TINY + steps + ["--save", save, "--metrics", metrics])
        out = read_until(p, r"^step +1/40")
        p.send_signal(sig)
        out += p.stdout.read()
        p.wait()
        check(p.returncode == status, f"{name}: status {p.returncode}, expected {status}\n{out}")
        m = re.search(rf"saved +step (\d+) to .*\nstopped  by {name} after step (\d+) of 40; "
                      rf"--resume {re.escape(save)} continues it\n", out)
        check(m and m[1] == m[2], f"{name}: no 'saved' and 'stopped' lines of one step:\n{out}")
        stopped = int(m[1])
        check(1 <= stopped < 40 and "done" in out, f"{name}: stopped after step {stopped}:\n{out}")
        check(checkpoint_step(save) == stopped, f"{name}: the checkpoint is not of step {stopped}")
        out = run(trainer, TINY + steps + ["--resume", save, "--metrics", metrics])
        check(f"resumed  from {save} at step {stopped}" in out, f"{name}: no resume:\n{out}")
        check(losses(metrics) == losses(f"{d}/straight.jsonl"),
              f"{name}: stopped at {stopped} and resumed, the losses differ from a straight run")
        print(f"{name}: stopped after step {stopped} with status {status}, resumed bit for bit")

    # A second signal while a long step runs: out at once, nothing saved.
    save = f"{d}/twice"
    p = start(trainer, ["--batch", "32", "--seq", "256", "--threads", "1", "--steps", "4",
                        "--log-every", "1", "--save", save])
    out = read_until(p, r"^step +1/4")
    p.send_signal(signal.SIGINT)
    time.sleep(0.1)  # the first is handled; the step (about 1 s) goes on
    p.send_signal(signal.SIGTERM)
    out += p.stdout.read()
    p.wait()
    check(p.returncode == 143 and "second signal: exiting at once, without saving" in out
          and "stopped" not in out and checkpoint_step(save) is None,
          f"two signals: status {p.returncode}, expected 143 and no save:\n{out}")
    print("SIGINT then SIGTERM: exited at once with status 143, nothing saved")


def test_kill(trainer, workdir):
    d = fresh(workdir, "kill")
    steps = 300  # far more than 40 short sessions take, however the machine's speed varies
    args = TINY + ["--steps", str(steps), "--save-every", "1"]
    begin = time.perf_counter()
    run(trainer, args + ["--save", f"{d}/straight", "--metrics", f"{d}/straight.jsonl"])
    straight = losses(f"{d}/straight.jsonl")
    check([s for s, _, _ in straight] == list(range(1, steps + 1)), "the straight run's steps")

    # Time one step in a session (a step and its save, once it logs).
    p = start(trainer, args + ["--save", f"{d}/timing"])
    read_until(p, r"^step +1/")
    t0 = time.perf_counter()
    read_until(p, r"^step +11/")
    step_seconds = (time.perf_counter() - t0) / 10
    p.kill()
    p.wait()

    rng = random.Random(KILL_SEED)
    save, metrics = f"{d}/state", f"{d}/metrics.jsonl"
    saved = None  # the checkpoint's step after the last kill
    kills = in_save = 0
    while True:
        resume = ["--resume", save] if saved is not None else []
        p = start(trainer, args + ["--save", save, "--metrics", metrics] + resume)
        if saved is not None:
            read_until(p, rf"^resumed  from {re.escape(save)} at step {saved}$")
        if kills == KILLS:
            out = p.stdout.read()
            p.wait()
            check(p.returncode == 0, f"the last session: status {p.returncode}\n{out}")
            break
        # Kill within the first steps of the session: mid-step, mid-save or between.
        read_until(p, r"^step ")
        time.sleep(rng.uniform(0, 2 * step_seconds))
        p.kill()
        p.wait()
        kills += 1
        in_save += bool(temporaries(save))
        step = checkpoint_step(save)
        check(saved is None or (step is not None and step >= saved),
              f"kill {kills}: the checkpoint went from step {saved} to {step}")
        saved = step
        check(saved is None or saved < steps, f"kill {kills}: the run ended before it")

    check(losses(metrics) == straight,
          f"after {kills} kills the losses differ from a straight run:\n"
          f"{losses(metrics)}\nvs\n{straight}")
    check(checkpoint_step(save) == steps, "the last checkpoint is not of the last step")
    check(not temporaries(save), f"temporary files left: {temporaries(save)}")
    print(f"{kills} kills ({in_save} during a save; a step and its save take {step_seconds * 1e3:.1f}"
          f" ms): every checkpoint whole, {steps} losses equal to a straight run's bit for bit,"
          f" no temporary file left ({time.perf_counter() - begin:.1f} s)")


def test_nonfinite(trainer, workdir):
    d = fresh(workdir, "nonfinite")
    # lr 1e30: step 1 is finite and sends the weights to ~1e28; step 2's
    # forward overflows.
    absurd = TINY + ["--steps", "4", "--lr", "1e30"]
    out = run(trainer, absurd + ["--save", f"{d}/stop"], expect_status=1)
    check(re.search(r"error: step 2: the (loss|gradient norm) is not finite \(loss [^,]+, "
                    r"gradient norm [^)]+\); the update was not applied", out),
          f"stop: no error naming step 2:\n{out}")
    check(checkpoint_step(f"{d}/stop") is None, "stop: a checkpoint was written")
    print("--on-nonfinite stop: exit 1 naming step 2, nothing saved")

    out = run(trainer, absurd + ["--on-nonfinite", "skip", "--save", f"{d}/skip", "--metrics",
                                 f"{d}/skip.jsonl"])
    check(re.search(r"step +2/4 \| loss .*\| skipped: not finite, no update", out)
          and re.search(r"done .*; 3 step\(s\) skipped for a non-finite loss or gradient norm",
                        out), f"skip: no skipped steps 2 to 4 in the log:\n{out}")
    with open(f"{d}/skip.jsonl", encoding="utf-8") as f:
        skipped = [m["step"] for m in map(json.loads, f) if m.get("skipped")]
    check(skipped == [2, 3, 4], f"skip: the metrics mark steps {skipped} skipped")
    check(checkpoint_step(f"{d}/skip") == 4, "skip: no checkpoint of step 4")
    out = run(trainer, absurd + ["--on-nonfinite", "skip", "--resume", f"{d}/skip"])
    check(f"resumed  from {d}/skip at step 4" in out, f"skip: the checkpoint does not load:\n{out}")
    print("--on-nonfinite skip: steps 2-4 skipped and logged, the run saved and ended")

    out = run(trainer, absurd + ["--detect-anomaly"], expect_status=1)
    check(re.search(r"error: .*anomaly: \S+ at model\.\S+ produced (NaN|inf) in forward", out),
          f"--detect-anomaly: no op named:\n{out}")
    print("--detect-anomaly: " + re.search(r"anomaly: .*", out)[0])
    run(trainer, TINY + ["--steps", "2", "--detect-anomaly"])
    print("--detect-anomaly on a healthy run: no error")


def rank_pid(launcher_pid, rank):
    """The pid of the process of `rank` that the launcher started (its MPI rank is in
    its environment)."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                parents[int(pid)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    for pid in parents:
        ancestor = parents[pid]
        while ancestor not in (0, 1, launcher_pid):
            ancestor = parents.get(ancestor, 0)
        if ancestor != launcher_pid:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        except OSError:
            continue
        for key in (b"OMPI_COMM_WORLD_RANK", b"PMI_RANK", b"PMIX_RANK"):
            if env.get(key) == str(rank).encode():
                return pid
    fail(f"no process of rank {rank} under the launcher (pid {launcher_pid})")


def test_mpi_interrupt(trainer, workdir, launcher):
    d = fresh(workdir, "mpi_interrupt")
    steps = ["--steps", "40"]
    run(trainer, TINY + steps + ["--metrics", f"{d}/straight.jsonl"], launcher=launcher)
    save, metrics = f"{d}/state", f"{d}/metrics.jsonl"
    p = start(trainer, TINY + steps + ["--save", save, "--metrics", metrics], launcher)
    out = read_until(p, r"^step +1/40")
    os.kill(rank_pid(p.pid, 1), signal.SIGTERM)
    out += p.stdout.read()
    p.wait()
    m = re.search(r"saved +step (\d+) to .*\nstopped  by SIGTERM after step (\d+) of 40", out)
    check(p.returncode != 0 and m and m[1] == m[2],
          f"SIGTERM to rank 1: status {p.returncode}, no 'saved' and 'stopped' lines of one step "
          f"from rank 0:\n{out}")
    stopped = int(m[1])
    check(checkpoint_step(save) == stopped, f"the checkpoint is not of step {stopped}")
    out = run(trainer, TINY + steps + ["--resume", save, "--metrics", metrics], launcher=launcher)
    check(losses(metrics) == losses(f"{d}/straight.jsonl"),
          f"stopped at {stopped} and resumed, the losses differ from a straight run:\n{out}")
    print(f"SIGTERM to rank 1: both ranks stopped after step {stopped} (status {p.returncode}), "
          f"rank 0 saved it, 2 ranks resumed it bit for bit")


def main():
    cases = {"interrupt": test_interrupt, "kill": test_kill, "nonfinite": test_nonfinite}
    if len(sys.argv) > 4 and sys.argv[3] == "mpi_interrupt":
        test_mpi_interrupt(sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[4:])
        return
    if len(sys.argv) != 4 or sys.argv[3] not in cases:
        sys.exit(__doc__)
    trainer, workdir, case = sys.argv[1:]
    os.makedirs(workdir, exist_ok=True)
    cases[case](trainer, os.path.abspath(workdir))


if __name__ == "__main__":
    main()
