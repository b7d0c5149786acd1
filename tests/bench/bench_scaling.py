#!/usr/bin/env python3
"""bench_scaling.py — strong scaling of a job over its local mesh, and where each step's time goes.

Runs `salamander run JOB --nodes N --steps S` for each N (the same global batch, so the work is split
N ways), each setting --repeat times with the settings alternating, optionally with every worker
confined to F CPUs (--cpu-share F: the fair way to measure many workers on few cores). For each N
it prints tokens/s (median and range over the repeats) and the speed-up over the first N, then a
table of the per-step overhead, medians over the steps after --skip and over every worker:

  step      the controller's step time (StepBegin sent -> every vote in)
  ctl       step - compute: the controller's round trip (begin, votes, commit) and its own work
  compute   the slowest worker's forward + backward + gradient sync (its vote's compute_ms)
  busy      a worker's compute outside collectives (wall), and its CPU time (busy cpu)
  exchange  in the passes' token all-to-alls (wall: waiting for the slowest rank included)
  sync      in the gradient synchronisation (dense all-reduce, experts among their holders, norm)
  update    the optimizer step after the commit

The worker figures come from the workers' debug log ("step N computed in ... (busy ..., exchange
..., sync ...; busy cpu ...)"), so the runs use --log-level debug.

  tests/bench/bench_scaling.py [--salamander build/salamander] [--job scripts/jobs/drill8.lua]
      [--nodes 4,8] [--steps 60] [--skip 10] [--repeat 3] [--cpu-share 0.22] [--set K=V,...]
      [--out DIR]
"""
import argparse
import csv
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

STEP_LINE = re.compile(
    r"step (\d+) computed in ([\d.]+) ms \(busy ([\d.]+), exchange ([\d.]+), sync ([\d.]+); "
    r"busy cpu ([\d.]+), (?:experts' cpu [\d.]+ for \d+ rows, )?process cpu ([\d.]+); update ([\d.]+)"
    r"(?:; \d+ page faults)?\)")
WORKER_FIELDS = ["compute", "busy", "exchange", "sync", "busy_cpu", "process_cpu", "update"]


def run_once(a, nodes, out):
    cmd = [a.salamander, "run", a.job, "--nodes", str(nodes), "--steps", str(a.steps), "--out", out,
           "--log-level", "debug", "--json"]
    if a.cpu_share:
        cmd += ["--cpu-share", str(a.cpu_share)]
    if a.set:
        cmd += ["--set", a.set]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = [l for l in p.stdout.strip().splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        sys.exit(f"bench_scaling: {' '.join(cmd)} failed (exit {p.returncode}); see {out}")
    return json.loads(lines[-1])


def step_figures(out, skip):
    rows = [r for r in csv.DictReader(open(os.path.join(out, "metrics.csv"))) if int(r["step"]) >= skip]
    step = [float(r["step_ms"]) for r in rows]
    ctl = [float(r["step_ms"]) - float(r["compute_ms"]) for r in rows]
    worker = {k: [] for k in WORKER_FIELDS}
    for log in glob.glob(os.path.join(out, "node*.log")):
        with open(log, errors="replace") as f:
            for line in f:
                m = STEP_LINE.search(line)
                if m and int(m.group(1)) >= skip:
                    for k, v in zip(WORKER_FIELDS, m.groups()[1:]):
                        worker[k].append(float(v))
    return step, ctl, worker


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--salamander", default="build/salamander")
    ap.add_argument("--job", default="scripts/jobs/drill8.lua")
    ap.add_argument("--nodes", default="4,8")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=10, help="steps left out of the figures (warm-up)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cpu-share", type=float, default=0.22)
    ap.add_argument("--set", default="")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    nodes = [int(n) for n in a.nodes.split(",")]
    if a.skip >= a.steps:
        sys.exit(f"bench_scaling: --skip {a.skip} leaves none of the {a.steps} steps")
    base = a.out or tempfile.mkdtemp(prefix="bench_scaling-")
    tput = {n: [] for n in nodes}
    figs = {n: ([], [], {k: [] for k in WORKER_FIELDS}) for n in nodes}
    for r in range(a.repeat):
        for n in nodes:
            out = os.path.join(base, f"n{n}-run{r + 1}")
            s = run_once(a, n, out)
            tput[n].append(s["tokens_per_s"])
            step, ctl, worker = step_figures(out, a.skip)
            figs[n][0].extend(step)
            figs[n][1].extend(ctl)
            for k in WORKER_FIELDS:
                figs[n][2][k].extend(worker[k])
            print(f"  {n} nodes, run {r + 1}: {s['tokens_per_s']:.0f} tokens/s ({out})", file=sys.stderr)

    share = f"each worker confined to {a.cpu_share} CPU" if a.cpu_share else "workers unconfined"
    print(f"\n{a.job} {a.set}, {a.steps} steps, {share}, {a.repeat} runs per setting (alternating)\n")
    print("| nodes | tokens/s median [range] | vs " + str(nodes[0]) + " nodes |")
    print("| ---: | ---: | ---: |")
    first = med(tput[nodes[0]])
    for n in nodes:
        t = tput[n]
        print(f"| {n} | {med(t):.0f} [{min(t):.0f}-{max(t):.0f}] | {med(t) / first:.2f}x |")
    print("\nper step, medians (ms):\n")
    print("| nodes | step | ctl | compute | busy | busy cpu | exchange | sync | update |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in nodes:
        step, ctl, w = figs[n]
        print(f"| {n} | {med(step):.1f} | {med(ctl):.1f} | {med(w['compute']):.1f} | {med(w['busy']):.1f} | "
              f"{med(w['busy_cpu']):.1f} | {med(w['exchange']):.1f} | {med(w['sync']):.1f} | {med(w['update']):.1f} |")


if __name__ == "__main__":
    main()
