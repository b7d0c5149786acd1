#!/usr/bin/env bash
# launch.sh — the commands of a Salamander job across machines: CURVE keys, the controller (and
# its resume after a death), one agent per node, and an operator's REPL. salamander.sbatch calls
# it under Slurm; tests/integration/t0810_partition.cpp runs the same subcommands inside network
# namespaces, so what the example runs is what the test checks. See docs/slurm.md.
#
#   launch.sh keys                 keygen into $SAL_RUN_DIR/keys: ctl (controller), node (every
#                                  agent), admin (an operator), and the allowlist naming the last two
#   launch.sh controller JOB.lua   the controller, bound on $SAL_CONTROLLER_ADDR, run dir $SAL_RUN_DIR
#   launch.sh resume               the controller again, from $SAL_RUN_DIR's journal (after it died)
#   launch.sh agent                one node: $SAL_DEVICES, data plane on $SAL_DATA_HOST
#   launch.sh repl [ARGS]          `salamander repl` to the controller as the admin key
#
# Options after the subcommand go to salamander as they are (e.g. `agent --log-level debug`).
# Settings (environment):
#   SAL_RUN_DIR          run directory on storage every node sees: keys, journal, metrics (required)
#   SAL_CONTROLLER_ADDR  the controller's IPv4 address, as the agents reach it (required)
#   SAL_MESH_PORT        the mesh port (default 29400); the REPL listens on the next one
#   SAL_DEVICES          this node's devices (default cpu:1)
#   SAL_DATA_HOST        this node's data-plane address (default: what this host's name resolves to)
#   SAL_NODE_NAME        this node's name in job.nodes() (default: the host name)
#   SAL_PRIVATE_NETWORK  1: the nodes' data-plane addresses are on a network no stranger reaches;
#                        the controller is started with --set security.private_network=true (the
#                        Gloo data plane is not authenticated: without it, workers refuse to listen
#                        beyond loopback). Default 0: say so in the job file instead, or not at all
#   SALAMANDER           the salamander binary (default: salamander on PATH)
set -euo pipefail

SALAMANDER="${SALAMANDER:-salamander}"
MESH_PORT="${SAL_MESH_PORT:-29400}"
REPL_PORT=$((MESH_PORT + 1))

die() {
  echo "launch.sh: $*" >&2
  exit 2
}

need() {
  [ -n "${!1:-}" ] || die "$1 is not set (see the top of $0)"
}

# The public key in a .pub file written by `salamander keygen`.
public_key() {
  sed -n 's/^public-key = //p' "$1"
}

# This host's address as other hosts reach it: what its name resolves to (IPv4).
host_address() {
  getent ahostsv4 "$(hostname)" | awk 'NR == 1 { print $1 }'
}

mesh_endpoint() { echo "tcp://$SAL_CONTROLLER_ADDR:$MESH_PORT"; }
repl_endpoint() { echo "tcp://$SAL_CONTROLLER_ADDR:$REPL_PORT"; }

cmd_keys() {
  local k="$SAL_RUN_DIR/keys"
  mkdir -p "$k"
  chmod 700 "$k"
  for name in ctl node admin; do
    "$SALAMANDER" keygen "$k/$name" >/dev/null
  done
  {
    echo "$(public_key "$k/node.pub") node agents"
    echo "$(public_key "$k/admin.pub") admin operator"
  } >"$k/allow"
  echo "keys in $k"
}

# What the controller is given on a first start and on --resume alike: its REPL endpoint, key and
# allowlist (the journal keeps the job and the mesh endpoint, but no secrets).
controller_args=()
set_controller_args() {
  need SAL_CONTROLLER_ADDR
  local k="$SAL_RUN_DIR/keys"
  controller_args=(--repl "$(repl_endpoint)" --server-key "$k/ctl.key" --allow "$k/allow")
}

cmd_controller() {
  [ $# -ge 1 ] || die "controller JOB.lua [options]"
  local job="$1"
  shift
  set_controller_args
  local private=()
  [ "${SAL_PRIVATE_NETWORK:-0}" = 1 ] && private=(--set security.private_network=true)
  exec "$SALAMANDER" controller "$job" --out "$SAL_RUN_DIR" --mesh "$(mesh_endpoint)" "${controller_args[@]}" \
    "${private[@]}" "$@"
}

cmd_resume() {
  set_controller_args
  exec "$SALAMANDER" controller --resume "$SAL_RUN_DIR" "${controller_args[@]}" "$@"
}

cmd_agent() {
  need SAL_CONTROLLER_ADDR
  local k="$SAL_RUN_DIR/keys" data_host
  data_host="${SAL_DATA_HOST:-$(host_address)}"
  [ -n "$data_host" ] || die "cannot resolve $(hostname) to an IPv4 address: set SAL_DATA_HOST"
  exec "$SALAMANDER" agent --controller "$(mesh_endpoint)" --name "${SAL_NODE_NAME:-$(hostname)}" \
    --devices "${SAL_DEVICES:-cpu:1}" --data-host "$data_host" \
    --server-key "$k/ctl.pub" --key "$k/node.key" "$@"
}

cmd_repl() {
  need SAL_CONTROLLER_ADDR
  local k="$SAL_RUN_DIR/keys"
  exec "$SALAMANDER" repl "$(repl_endpoint)" --server-key "$k/ctl.pub" --key "$k/admin.key" "$@"
}

[ $# -ge 1 ] || die "usage: launch.sh keys | controller JOB.lua | resume | agent | repl [args] (see the top of $0)"
sub="$1"
shift
need SAL_RUN_DIR
case "$sub" in
  keys) cmd_keys "$@" ;;
  controller) cmd_controller "$@" ;;
  resume) cmd_resume "$@" ;;
  agent) cmd_agent "$@" ;;
  repl) cmd_repl "$@" ;;
  *) die "unknown subcommand '$sub' (keys, controller, resume, agent, repl)" ;;
esac
