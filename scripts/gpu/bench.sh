#!/usr/bin/env bash
# bench.sh — run ON THE GPU MACHINE from the repository root: builds build-gpu/, runs the gpu-labelled
# tests, times our MoE layer kernels (bench_moe_gpu) and the PyTorch peer (torch_moe_layer.py) on the
# same GPU, the NCCL lifecycle (bench_nccl), and prints the side-by-side table (moe_table.py) last.
# Every step runs even when an earlier one failed; the summary before the table names the failures
# and the time each step took, and the script exits non-zero if any failed. Sized for ~8 minutes
# on an H100 with a cold build (10 warmup + 50 timed passes per layer configuration on both sides).
#
# How to call it:
#   1. here, once (needs the network; .gpu/ is ignored by git):   bash scripts/gpu/collect-debs.sh
#   2. the device `run` tool:   command "bash scripts/gpu/bench.sh", carry [".gpu"], timeout_s 600
#      (a warm machine keeps build-gpu/, so a second call only rebuilds what changed).
#      SAL_GPU_STEPS picks steps when one call cannot hold them all (600 s per call), e.g.
#      "SAL_GPU_STEPS='build nvidia-smi tests' bash scripts/gpu/bench.sh", then
#      "SAL_GPU_STEPS='build bench_moe_gpu torch bench_nccl train table' bash scripts/gpu/bench.sh".
# What comes back under $OUT (default /tmp/sal-bench when run by hand):
#   bench.log    everything printed, in order        tests.txt   the ctest output, failures included
#   ours.jsonl   bench_moe_gpu --json lines           torch.jsonl torch_moe_layer.py --json lines
#   nccl.txt     bench_nccl's output                  table.md    the final tables (also printed last)
#   train.txt    the training step with and without snapshots (gpu_quickstart through salamander run)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/sal-bench}
mkdir -p "$OUT"
rm -f "$OUT/ours.jsonl" "$OUT/torch.jsonl" "$OUT/table.md"  # never a previous run's figures
ITERS=(--warmup 10 --iters 50)

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
  bash -c 'trap '\''printf "%s\n" "${LD_LIBRARY_PATH:-}" > /tmp/sal-ld-path'\'' EXIT; . scripts/gpu/build.sh'
  local rc=$?
  if [ -s /tmp/sal-ld-path ]; then
    LD_LIBRARY_PATH=$(cat /tmp/sal-ld-path)
    export LD_LIBRARY_PATH
  fi
  return $rc
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
  timeout -k 10 300 ctest --test-dir build-gpu -L gpu --output-on-failure -j 4 >"$OUT/tests.txt" 2>&1 || rc=$?
  if grep -q 'tests passed' "$OUT/tests.txt"; then sed -n '/tests passed/,$p' "$OUT/tests.txt"; else tail -20 "$OUT/tests.txt"; fi
  [ "$rc" -eq 124 ] && echo "ctest: stopped after 300 s (see tests.txt)"
  return $rc
}

# A benchmark binary, rebuilt first by itself: a failed full build (another target) must not leave
# a stale binary timed, nor stop this one.
ours() {
  cmake --build build-gpu --target bench_moe_gpu >/tmp/bench-target.log 2>&1 || { tail -30 /tmp/bench-target.log; return 1; }
  timeout -k 10 240 build-gpu/bench_moe_gpu "${ITERS[@]}" --json "$OUT/ours.jsonl"
}

torch_peer() {
  timeout -k 10 180 python3 tests/bench/torch_moe_layer.py "${ITERS[@]}" --json "$OUT/torch.jsonl"
}

nccl() {
  cmake --build build-gpu --target bench_nccl >/tmp/bench-target.log 2>&1 || { tail -30 /tmp/bench-target.log; return 1; }
  timeout -k 10 120 build-gpu/bench_nccl --reps 10 2>&1 | tee "$OUT/nccl.txt"
}

# The full training step of scripts/jobs/gpu_quickstart.lua (GPT-S width, one worker on GPU 0)
# through `salamander run`, twice: without snapshots and with one every 100 steps, 300 steps each,
# tokens/s side by side (the issue's target: snapshot overhead <= 1 %). A snapshot of this model is
# 1.9 GB: the pinned copy overlaps the next step, but the writer needs seconds to put it on disk,
# so much more frequent snapshots are bound by the disk, not by the GPU. Summaries in train.txt.
train() {
  local data=/usr/share/games/fortunes rc=0 tps=()
  [ -d "$data" ] || data=/tmp/deps$data
  : >"$OUT/train.txt"
  for every in 0 100; do
    local job=/tmp/gpu_quickstart_$every.lua
    sed -e "s#/usr/share/games/fortunes#$data#" -e "s#checkpoint_every = [0-9]*#checkpoint_every = $every#" \
      scripts/jobs/gpu_quickstart.lua >"$job"
    rm -rf "/tmp/gpu-run-$every"
    if ! timeout -k 10 240 build-gpu/salamander run "$job" --steps 300 --json --out "/tmp/gpu-run-$every" \
        >"/tmp/gpu-run-$every.json" 2>"/tmp/gpu-run-$every.err"; then
      echo "snapshots every $every: the run failed"; tail -20 "/tmp/gpu-run-$every.err"; rc=1
    fi
    echo "checkpoint_every=$every: $(tail -1 "/tmp/gpu-run-$every.json")" >>"$OUT/train.txt"
    tps+=("$(tail -1 "/tmp/gpu-run-$every.json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])' 2>/dev/null || echo 0)")
  done
  python3 - "${tps[@]}" <<'PY' | tee -a "$OUT/train.txt"
import sys
off, on = (float(x) for x in sys.argv[1:3])
print(f"training step, gpu_quickstart (300 steps): {off:,.0f} tokens/s without snapshots, {on:,.0f} with one every 100 steps")
if off > 0 and on > 0:
    print(f"snapshot overhead: {100 * (off - on) / off:.2f} % (target <= 1 %)")
PY
  return $rc
}

table() {
  python3 tests/bench/moe_table.py "$OUT/ours.jsonl" "$OUT/torch.jsonl" >"$OUT/table.md"
}

main() {
  local t0=$SECONDS
  echo "bench.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  local want=" ${SAL_GPU_STEPS:-build nvidia-smi tests bench_moe_gpu torch bench_nccl train table} "
  run_if() { [[ $want == *" $1 "* ]] && step "$@"; return 0; }
  run_if build build
  run_if nvidia-smi gpu_line
  run_if tests tests
  run_if bench_moe_gpu ours
  run_if torch torch_peer
  run_if bench_nccl nccl
  run_if train train
  run_if table table
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
