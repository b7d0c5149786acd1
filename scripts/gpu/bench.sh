#!/usr/bin/env bash
# bench.sh — run ON THE GPU MACHINE from the repository root: takes the build packed here by
# scripts/gpu/pack.sh (.gpu/build-gpu), or builds build-gpu/ there; runs the gpu-labelled tests, times
# our MoE layer kernels (bench_moe_gpu) and the PyTorch peer (torch_moe_layer.py) on the same GPU,
# the NCCL lifecycle (bench_nccl), the GPU job's training step with and without snapshots, the
# kernels of that step (Nsight Compute), the CPU benchmarks on that machine's cores, and prints the
# side-by-side table (moe_table.py). Every step runs even when an earlier one failed; the summary
# names the failures and the time each step took, and the script exits non-zero if any failed.
#
# How to call it:
#   1. here (needs the network; .gpu/ is ignored by git):
#        bash scripts/gpu/collect-debs.sh && bash scripts/gpu/pack.sh
#   2. the device `run` tool: command "bash scripts/gpu/bench.sh", carry [".gpu/debs",
#      ".gpu/build-gpu.tar.xz"] (the unpacked tree and the .debs together exceed what a call
#      carries), timeout_s 600.
#      SAL_GPU_STEPS picks steps and SAL_GPU_CAP_PERCENT scales each step's time limit when one
#      call cannot hold them all (600 s per call), e.g.
#      "SAL_GPU_CAP_PERCENT=50 SAL_GPU_STEPS='build nvidia-smi tests bench_moe_gpu torch bench_nccl table train' bash scripts/gpu/bench.sh"
#      (200 s on an H200), then "SAL_GPU_CAP_PERCENT=50 SAL_GPU_STEPS='build tests train gpu_recovery cpu' ...".
# What comes back under $OUT (default /tmp/sal-bench when run by hand; at most 8 files a call):
#   bench.log    everything printed, in order        tests.txt   the ctest output, failures included
#   ours.jsonl   bench_moe_gpu --json lines           torch.jsonl torch_moe_layer.py --json lines
#   nccl.txt     bench_nccl's output                  table.md    the final tables (also printed last)
#   train.txt, train-runs.tgz (every run's metrics.csv and events.csv)   the training step
#   ncu.csv      the kernels' times (profile)         cpu.txt     bench_recovery and bench_skew
#   gpu_recovery.txt   a GPU worker's recovery from a node's loss, split into its parts
#   replan.txt   re-plans that move experts between two GPU workers: each switch's time
#   copies.txt   a snapshot-sized copy's cost to another stream's copies and work (bench_copy_overlap)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/sal-bench}
mkdir -p "$OUT"
rm -f "$OUT/ours.jsonl" "$OUT/torch.jsonl" "$OUT/table.md"  # never a previous run's figures
ITERS=(--warmup 10 --iters 50)

# Each step's time limit, scaled by SAL_GPU_CAP_PERCENT (default 100) to fit a shorter device call.
cap() { echo $(($1 * ${SAL_GPU_CAP_PERCENT:-100} / 100)); }

FAILED=()
SUMMARY=()

# step NAME COMMAND...: runs it, times it, records its status; never stops the script.
step() {
  local name=$1 t0=$SECONDS rc=0
  shift
  echo
  echo "=== $name: $*"
  "$@" || rc=$?
  local took=$((SECONDS - t0)) status=ok
  if [ "$rc" -ne 0 ]; then
    status="FAILED (exit $rc)"
    FAILED+=("$name")
  fi
  echo "=== $name: $status in ${took}s"
  SUMMARY+=("$(printf '  %-14s %-18s %5ss' "$name" "$status" "$took")")
  return 0
}

# build.sh is written to be sourced and runs under set -e (it exits on failure): source it in a
# bash of its own (a subshell would inherit the "|| rc=$?" context of step, in which bash ignores
# set -e), and take the library path it sets out through a file, written even when it failed.
build() {
  rm -f /tmp/sal-ld-path
  if [ -f .gpu/build-gpu.tar.xz ] && [ ! -f .gpu/build-gpu/ORIGIN ]; then
    tar -C .gpu -xJf .gpu/build-gpu.tar.xz || { echo "build: cannot unpack .gpu/build-gpu.tar.xz"; return 1; }
  fi
  [ -f .gpu/build-gpu/ORIGIN ] && [ ! -f build-gpu/build.ninja ] && { prebuilt; return; }
  bash -c 'trap '\''printf "%s\n" "${LD_LIBRARY_PATH:-}" > /tmp/sal-ld-path'\'' EXIT; . scripts/gpu/build.sh'
  local rc=$?
  if [ -s /tmp/sal-ld-path ]; then
    LD_LIBRARY_PATH=$(cat /tmp/sal-ld-path)
    export LD_LIBRARY_PATH
  fi
  return $rc
}

# A build packed here by scripts/gpu/pack.sh (.gpu/build-gpu): unpack the .debs for the libraries
# the programs load (deps.sh, as build.sh does), put the packed tree at build-gpu/, and make the checkout's path it was built in
# (the programs and CTest name it) lead to this checkout.
prebuilt() {
  local origin
  origin=$(cat .gpu/build-gpu/ORIGIN)
  . scripts/gpu/deps.sh
  rm -rf build-gpu && cp -a .gpu/build-gpu build-gpu
  if [ "$(readlink -f "$origin")" != "$(readlink -f "$PWD")" ]; then
    [ -e "$origin" ] && { echo "prebuilt: $origin exists here and is not this checkout"; return 1; }
    mkdir -p "$(dirname "$origin")" && ln -s "$PWD" "$origin"
  fi
  # NCCL: CUDA's lib64 where it is there, else the copy PyTorch's wheels bring.
  if [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
  fi
  export LD_LIBRARY_PATH
  local missing
  missing=$(ldd build-gpu/salamander build-gpu/libsalamander_gpu.so build-gpu/test_cuda_ops | grep 'not found' | sort -u)
  [ -z "$missing" ] || { echo "prebuilt: libraries not found:"; echo "$missing"; return 1; }
  echo "build-gpu: packed build of $(git rev-parse --short HEAD 2>/dev/null || echo '?') from $origin"
  build-gpu/salamander --version
}

# Rebuilds one target where build-gpu/ is a build tree (a packed one has none to rebuild).
rebuild() {
  [ -f build-gpu/build.ninja ] || return 0
  cmake --build build-gpu --target "$1" >/tmp/bench-target.log 2>&1 || { tail -30 /tmp/bench-target.log; return 1; }
}

gpu_line() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,temperature.gpu,utilization.gpu \
    --format=csv,noheader
}

# The gpu-labelled tests (kernels against the CPU references, NCCL): full output to tests.txt, the
# summary and the list of failures here. Capped at 5 minutes in all (a hung NCCL case must not
# eat the benchmarks' time).
tests() {
  local rc=0
  timeout -k 10 "$(cap 300)" ctest --test-dir build-gpu -L gpu --output-on-failure -j 4 >"$OUT/tests.txt" 2>&1 || rc=$?
  if grep -q 'tests passed' "$OUT/tests.txt"; then sed -n '/tests passed/,$p' "$OUT/tests.txt"; else tail -20 "$OUT/tests.txt"; fi
  [ "$rc" -eq 124 ] && echo "ctest: stopped after $(cap 300) s (see tests.txt)"
  return $rc
}

# A benchmark binary, rebuilt first by itself: a failed full build (another target) must not leave
# a stale binary timed, nor stop this one.
ours() {
  rebuild bench_moe_gpu || return 1
  timeout -k 10 "$(cap 240)" build-gpu/bench_moe_gpu "${ITERS[@]}" --json "$OUT/ours.jsonl"
}

torch_peer() {
  timeout -k 10 "$(cap 180)" python3 tests/bench/torch_moe_layer.py "${ITERS[@]}" --json "$OUT/torch.jsonl"
}

nccl() {
  rebuild bench_nccl || return 1
  timeout -k 10 "$(cap 120)" build-gpu/bench_nccl --reps 10 2>&1 | tee "$OUT/nccl.txt"
}

# The full training step of scripts/jobs/gpu_quickstart.lua (GPT-S width, one worker on GPU 0)
# through `salamander run`, 600 steps a run, without snapshots and with one every N steps (the
# issue's target: snapshot overhead <= 1 % of tokens/s). Each run is EVERY:GEMMS:DISK[:STAGING[:CHUNK]] —
# snapshots every EVERY steps (0: none), the expert GEMMs as the worker picks them (auto: fused
# epilogues where they check out) or one cublasGemmEx per expert (per_expert), the run directory on
# the disk (disk) or in memory (shm: /dev/shm, which separates the cost of writing to the disk from
# the cost of taking the snapshot), and SAL_SNAPSHOT_STAGING (auto, the default: staged in spare
# device memory; host: copied straight to pinned memory) and SAL_SNAPSHOT_CHUNK_MB (the staged copy
# to the host paced in chunks of that many MB, 8 by default; 0: one copy). SAL_GPU_TRAIN_RUNS lists them; the default
# alternates them twice so that a drift from run to run shows as a difference between two runs of a
# kind. The job's re-plans by load (train.rebalance_every, every 100 steps in the shipped file) are
# turned off: a re-plan at a snapshot's step would count as the snapshot's cost
# (on 2026-11-30 the re-plans and the snapshots every 100 steps fell on the same steps). A snapshot
# of this model is 1.9 GB: the copy overlaps the next steps, and the writer puts it on disk from the
# pinned memory in about 0.6 s. Every run also writes a final checkpoint of that size: `sync`
# before each run, so that one run's writeback does not slow the next (on 2026-11-26 a run after a
# snapshot run was 16 % slower with the same settings).
# The overhead is given two ways: tokens/s against the mean of the runs without snapshots, and
# within each snapshot run (free of any drift between runs) the wall time its steps from each
# snapshot's step to 5 steps after took beyond the run's median step, as a share of the run's time.
# Summaries in train.txt; every run's metrics.csv and events.csv in train-runs.tgz.
train() {
  local data=/usr/share/games/fortunes rc=0 i=0
  local default="0:auto:disk 100:auto:disk 100:auto:disk:auto:0 250:auto:disk"
  local runs=(${SAL_GPU_TRAIN_RUNS:-$default $default})
  [ -d "$data" ] || data=/tmp/deps$data
  : >"$OUT/train.txt"
  local run every gemm where staging chunk csvs=()
  rm -rf /tmp/train-runs && mkdir -p /tmp/train-runs
  for run in "${runs[@]}"; do
    IFS=: read -r every gemm where staging chunk <<<"$run"
    staging=${staging:-auto} chunk=${chunk:-8}
    i=$((i + 1))
    local name=$i-$every-$gemm-$where-$staging-$chunk job=/tmp/gpu_quickstart_$every.lua dir
    dir=/tmp/gpu-run-$name
    [ "$where" = shm ] && dir=/dev/shm/gpu-run-$name
    sed -e "s#/usr/share/games/fortunes#$data#" -e "s#checkpoint_every = [0-9]*#checkpoint_every = $every#" \
      -e "s#rebalance_every = [0-9]*#rebalance_every = 0#" scripts/jobs/gpu_quickstart.lua >"$job"
    rm -rf "$dir"
    sync
    if ! SAL_EXPERT_GEMM=$gemm SAL_SNAPSHOT_STAGING=$staging SAL_SNAPSHOT_CHUNK_MB=$chunk timeout -k 10 "$(cap 90)" \
        build-gpu/salamander run "$job" --steps 600 --json \
        --out "$dir" >"/tmp/gpu-run-$name.json" 2>"/tmp/gpu-run-$name.err"; then
      echo "run $i ($run): failed"; tail -20 "/tmp/gpu-run-$name.err"; rc=1
    fi
    grep -m1 "expert GEMMs" "$dir/"*.log 2>/dev/null | head -1 >>"$OUT/train.txt"
    grep -h -m1 "snapshots staged\|snapshots copied straight" "$dir/"*.log 2>/dev/null | head -1 >>"$OUT/train.txt"
    echo "run $i ($run): $(tail -1 "/tmp/gpu-run-$name.json")" >>"$OUT/train.txt"
    grep -h ',snapshot_saved,' "$dir/events.csv" 2>/dev/null | sed 's/^[^"]*"//; s/"$//' | head -8 |
      sed "s/^/  run $i: /" >>"$OUT/train.txt"
    cp "$dir/metrics.csv" "/tmp/gpu-run-$name.csv" 2>/dev/null
    csvs+=("$every:$gemm:$where:$staging:$chunk:/tmp/gpu-run-$name.csv")
    cp "$dir/metrics.csv" "/tmp/train-runs/$name-metrics.csv" 2>/dev/null
    cp "$dir/events.csv" "/tmp/train-runs/$name-events.csv" 2>/dev/null
    [ "$where" = shm ] && rm -rf "$dir"  # memory, not disk: give it back
  done
  tar -C /tmp -czf "$OUT/train-runs.tgz" train-runs
  python3 - "${csvs[@]}" <<'PY' | tee -a "$OUT/train.txt"
import csv, statistics, sys
def rows_of(path):
    try:
        return [r for r in csv.DictReader(open(path)) if int(r["step"]) >= 20]
    except (OSError, ValueError, KeyError):
        return []
runs = []
for i, arg in enumerate(sys.argv[1:], 1):
    every, gemm, where, staging, chunk, path = arg.split(":", 5)
    rows = rows_of(path)
    if len(rows) < 2:
        print(f"run {i} ({every}:{gemm}:{where}:{staging}:{chunk}): no metrics"); continue
    t = [float(r["time_s"]) for r in rows]
    wall = t[-1] - t[0]
    tok = sum(float(r["tokens"]) for r in rows[1:])
    dt = {int(rows[k]["step"]): 1e3 * (t[k] - t[k - 1]) for k in range(1, len(rows))}
    med_dt = statistics.median(dt.values())
    runs.append(dict(i=i, every=int(every), gemm=gemm, where=where, staging=staging, chunk=chunk,
                     tps=tok / wall, wall=wall, dt=dt, med_dt=med_dt,
                     step=statistics.median(float(r["step_ms"]) for r in rows),
                     comp=statistics.median(float(r["compute_ms"]) for r in rows), last=rows[-1]["step"]))
base = [r["tps"] for r in runs if r["every"] == 0 and r["gemm"] == "auto"]
base_tps = statistics.mean(base) if base else None
for r in runs:
    what = (f"snapshots every {r['every']} ({r['where']}, staging {r['staging']}, chunks {r['chunk']} MB)"
            if r["every"] else "no snapshots")
    print(f"run {r['i']} ({what}, expert GEMMs {r['gemm']}), steps 20-{r['last']}: {r['tps']:,.0f} tokens/s, "
          f"median step {r['step']:.2f} ms (commit to commit {r['med_dt']:.2f}) of which compute {r['comp']:.2f} ms")
    if r["every"]:
        if base_tps:
            print(f"  against the mean of the runs without snapshots ({base_tps:,.0f}): "
                  f"{100 * (base_tps - r['tps']) / base_tps:.2f} % fewer tokens/s (target <= 1 %)")
        near = [s for s in r["dt"] if s >= r["every"] and s % r["every"] <= 5]
        excess = sum(r["dt"][s] - r["med_dt"] for s in near)
        n = sum(1 for s in r["dt"] if s % r["every"] == 0)
        worst = sorted(((r["dt"][s] - r["med_dt"], s) for s in near), reverse=True)[:3]
        print(f"  within the run: {n} snapshots took {excess:.0f} ms beyond the median step, commit to commit "
              f"({100 * excess / (r['wall'] * 1e3):.2f} % of the run's {r['wall']:.1f} s); slowest: "
              + ", ".join(f"step {s} +{d:.0f} ms" for d, s in worst))
        rest = sum(d - r["med_dt"] for s, d in r["dt"].items() if s not in near)
        print(f"  the other steps: {rest:.0f} ms beyond the median in all")
PY
  return $rc
}

# Where a training step's GPU time goes: Nsight Compute times each kernel of the GPU job's worker
# (one metric, the kernel's duration; the first 500 launches skipped — the first steps' warm-up —
# then 1500 timed, which covers some whole steps) into ncu.csv; the summary sums them by kernel.
# Not among the default steps: on the H200 (2026-11-26, three tries) ncu serialised the job so far
# that a step took 10 s and the run never reached the launches it was to time before the step's
# limit; the kernels' own times come from bench_moe_gpu's CUDA events instead. Ask for it by name.
profile() {
  local data=/usr/share/games/fortunes
  [ -d "$data" ] || data=/tmp/deps$data
  command -v ncu >/dev/null || { echo "ncu is not on this machine"; return 1; }
  sed -e "s#/usr/share/games/fortunes#$data#" -e "s#checkpoint_every = [0-9]*#checkpoint_every = 0#" \
    scripts/jobs/gpu_quickstart.lua >/tmp/gpu_profile.lua
  rm -rf /tmp/gpu-profile
  timeout -k 10 "$(cap 240)" ncu --clock-control none --target-processes all --metrics gpu__time_duration.sum \
    --launch-skip 500 --launch-count 1500 --csv --log-file "$OUT/ncu.csv" \
    build-gpu/salamander run /tmp/gpu_profile.lua --steps 60 --out /tmp/gpu-profile >/tmp/gpu-profile.out 2>&1
  local rc=$?
  # Twice before, ncu timed no kernel of the job: say what it and the run printed.
  echo "ncu exit $rc; the run's output and ncu's log, last lines:"
  tail -15 /tmp/gpu-profile.out
  grep -v '^"' "$OUT/ncu.csv" 2>/dev/null | tail -15
  python3 - "$OUT/ncu.csv" <<'PY'
import csv, collections, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(r.get("Metric Unit"), 1.0)
    b = by[r["Kernel Name"][:90]]
    b[0] += 1
    b[1] += float(r["Metric Value"].replace(",", "")) * scale
total = sum(v[1] for v in by.values())
print(f"{sum(v[0] for v in by.values())} kernels timed, {total / 1e3:.1f} ms of kernel time in all")
for name, (n, us) in sorted(by.items(), key=lambda kv: -kv[1][1])[:25]:
    print(f"{us / 1e3:9.2f} ms {n:6d}x  {name}")
PY
  return $rc
}

# Re-plans that move experts between GPU workers: gpu_quickstart on two nodes sharing GPU 0 (Gloo,
# host staging), 4 expert slots each, re-planned by load every 25 steps, 60 steps (at this width two
# workers sharing a GPU over Gloo took about 1.6 s a step on the H200); each re-plan's plan_applied
# event (replicas moved and kept, the switch's time, the slowest worker's connect and migrate) into
# replan.txt. SAL_GPU_REPLAN_BINS names the salamander binaries to compare (default
# build-gpu/salamander; e.g. an older packed build unpacked beside it, for a before and after);
# SAL_GPU_REPLAN_PLACEMENT a placement policy other than the job's (scripts/gpu/swap_one.lua: each
# re-plan trades one expert each way), SAL_GPU_REPLAN_STEPS and SAL_GPU_REPLAN_EVERY the run's
# length and the re-plans' interval (60 and 25).
replan() {
  local data=/usr/share/games/fortunes rc=0 bin n=0 set=()
  [ -d "$data" ] || data=/tmp/deps$data
  [ -n "${SAL_GPU_REPLAN_PLACEMENT:-}" ] && set=(--set "policies.placement=$SAL_GPU_REPLAN_PLACEMENT")
  sed -e "s#/usr/share/games/fortunes#$data#" -e "s#checkpoint_every = [0-9]*#checkpoint_every = 0#" \
    -e "s#rebalance_every = [0-9]*#rebalance_every = ${SAL_GPU_REPLAN_EVERY:-25}#" -e "s#nodes = 1,#nodes = 2,#" \
    -e "s#slots = 8,#slots = 4,#" scripts/jobs/gpu_quickstart.lua >/tmp/gpu_replan.lua
  : >"$OUT/replan.txt"
  for bin in ${SAL_GPU_REPLAN_BINS:-build-gpu/salamander}; do
    n=$((n + 1))
    rm -rf "/tmp/gpu-replan-$n"
    if ! timeout -k 10 "$(cap 120)" "$bin" run /tmp/gpu_replan.lua "${set[@]}" --steps "${SAL_GPU_REPLAN_STEPS:-60}" \
        --json --out "/tmp/gpu-replan-$n" \
        >"/tmp/gpu-replan-$n.json" 2>"/tmp/gpu-replan-$n.err"; then
      echo "replan with $bin: failed"; tail -20 "/tmp/gpu-replan-$n.err"; rc=1
    fi
    { echo "== $bin ($("$bin" --version 2>&1 | head -1)): $(tail -1 "/tmp/gpu-replan-$n.json" | cut -c1-300)"
      grep -h ',plan_applied,' "/tmp/gpu-replan-$n/events.csv" 2>/dev/null | sed 's/^[^"]*"//; s/"$//'
      grep -h "experts kept on the device" "/tmp/gpu-replan-$n/"*.log 2>/dev/null | head -6
      grep -h "applied in" "/tmp/gpu-replan-$n/"*.log 2>/dev/null | head -8  # switches over 1 s, their phases
    } | tee -a "$OUT/replan.txt"
  done
  return $rc
}

# What a snapshot-sized device-to-host copy on a stream of its own costs the small copies and the
# device work of another stream, whole or in chunks (bench_copy_overlap; copies.txt): the question
# the training step's ~40 ms at each snapshot left open on 2026-11-30.
copies() {
  rebuild bench_copy_overlap || return 1
  timeout -k 10 "$(cap 120)" build-gpu/bench_copy_overlap 2>&1 | tee "$OUT/copies.txt"
}

# Recovery of GPU workers: bench_recovery with 4 nodes whose workers all share GPU 0 (Gloo with host
# staging), one SIGKILLed at a time down to 2, the recovery split into its parts (gpu_recovery.txt).
gpu_recovery() {
  timeout -k 10 "$(cap 180)" build-gpu/bench_recovery 2 4 --devices cuda:0 2>&1 | tee "$OUT/gpu_recovery.txt"
}

# The CPU benchmarks on this machine's cores (16 on the lent ones): a core or more per worker,
# beside the figures docs/performance.md gives for 2 cores. Workers unconfined (no --cpu-share).
cpu() {
  local rc=0
  timeout -k 10 "$(cap 200)" build-gpu/bench_recovery 5 8 2>&1 | tee "$OUT/cpu.txt" || rc=1
  timeout -k 10 "$(cap 300)" build-gpu/bench_skew --rounds 3 --no-cpu-share 2>&1 | tee -a "$OUT/cpu.txt" || rc=1
  return $rc
}

table() {
  python3 tests/bench/moe_table.py "$OUT/ours.jsonl" "$OUT/torch.jsonl" >"$OUT/table.md"
}

main() {
  local t0=$SECONDS
  echo "bench.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  local want=" ${SAL_GPU_STEPS:-build nvidia-smi tests bench_moe_gpu torch bench_nccl table train replan copies gpu_recovery cpu} "
  run_if() { [[ $want == *" $1 "* ]] && step "$@"; return 0; }
  run_if build build
  run_if nvidia-smi gpu_line
  run_if copies copies
  run_if tests tests
  run_if bench_moe_gpu ours
  run_if torch torch_peer
  run_if bench_nccl nccl
  run_if table table
  run_if train train
  run_if replan replan
  run_if profile profile
  run_if gpu_recovery gpu_recovery
  run_if cpu cpu
  echo
  echo "bench.sh: $((SECONDS - t0)) s in all"
  printf '%s\n' "${SUMMARY[@]}"
  if [ ${#FAILED[@]} -gt 0 ]; then
    echo "FAILED steps: ${FAILED[*]}"
  else
    echo "all steps ok"
  fi
  echo
  [ -s "$OUT/table.md" ] && cat "$OUT/table.md"
  [ ${#FAILED[@]} -eq 0 ]
}

main 2>&1 | tee "$OUT/bench.log"
exit "${PIPESTATUS[0]}"
