// schema.cpp — the job file schema: one row per key with its type, bounds, and doc, plus the rules
// that tie keys together. Validation walks the Lua table the job file returned; nothing is
// accepted that the schema does not name.
#include <lua.hpp>

#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <variant>

#include "core/http_bind.h"
#include "core/strings.h"
#include "job/config.h"
#include "job/racks.h"
#include "job/schema.h"

namespace sal::job {
namespace {

// The most experts a GPU worker routes a token to (kernels/cuda/permute.h's kMaxTopK; this file
// builds without CUDA too).
constexpr int kGpuMaxTopK = 8;

using Ref = std::variant<int64_t*, double*, std::string*, bool*>;

struct Field {
  std::string key;  // dotted path: "mesh.heartbeat_ms"
  double lo = 0, hi = 0;
  std::vector<std::string> choices;  // for strings; empty = free text
  std::string doc;
  std::function<Ref(JobConfig&)> ref;
};

Field integer(std::string key, double lo, double hi, std::string doc,
              std::function<int64_t&(JobConfig&)> f) {
  return {std::move(key), lo, hi, {}, std::move(doc), [f](JobConfig& j) { return Ref(&f(j)); }};
}
Field number(std::string key, double lo, double hi, std::string doc,
             std::function<double&(JobConfig&)> f) {
  return {std::move(key), lo, hi, {}, std::move(doc), [f](JobConfig& j) { return Ref(&f(j)); }};
}
Field text(std::string key, std::vector<std::string> choices, std::string doc,
           std::function<std::string&(JobConfig&)> f) {
  return {std::move(key), 0, 0, std::move(choices), std::move(doc),
          [f](JobConfig& j) { return Ref(&f(j)); }};
}
Field flag(std::string key, std::string doc, std::function<bool&(JobConfig&)> f) {
  return {std::move(key), 0, 0, {}, std::move(doc), [f](JobConfig& j) { return Ref(&f(j)); }};
}

const std::vector<Field>& fields() {
  static const std::vector<Field> kFields = {
      text("name", {}, "job name (default: the file name without .lua)",
           [](JobConfig& j) -> std::string& { return j.name; }),
      text("model.kind", {"moe-gpt", "moe-llama"}, "model family (docs/models.md)",
           [](JobConfig& j) -> std::string& { return j.model.kind; }),
      integer("model.layers", 1, 256, "transformer blocks",
              [](JobConfig& j) -> int64_t& { return j.model.layers; }),
      integer("model.d_model", 8, 65536, "hidden size d",
              [](JobConfig& j) -> int64_t& { return j.model.d_model; }),
      integer("model.heads", 1, 1024, "attention heads (must divide d_model)",
              [](JobConfig& j) -> int64_t& { return j.model.heads; }),
      integer("model.experts", 1, 4096, "experts per MoE layer E",
              [](JobConfig& j) -> int64_t& { return j.model.experts; }),
      integer("model.top_k", 1, 64, "experts per token (<= experts)",
              [](JobConfig& j) -> int64_t& { return j.model.top_k; }),
      integer("model.seq_len", 2, 1 << 20, "context length in tokens",
              [](JobConfig& j) -> int64_t& { return j.model.seq_len; }),
      integer("model.vocab", 2, 1 << 20, "vocabulary (256 for bytes; above 65536 needs data.format = \"uint32\")",
              [](JobConfig& j) -> int64_t& { return j.model.vocab; }),
      number("model.aux_loss_weight", 0, 10, "Switch load-balancing loss weight",
             [](JobConfig& j) -> double& { return j.model.aux_loss_weight; }),
      number("model.skew", 1, 1e6, "forced routing for experiments: each token's experts are drawn with the "
             "model.hot_experts first ones this many times as likely (1: off, the gate routes)",
             [](JobConfig& j) -> double& { return j.model.skew; }),
      integer("model.hot_experts", 0, 4096, "experts model.skew favours (the first ones of each layer)",
              [](JobConfig& j) -> int64_t& { return j.model.hot_experts; }),
      text("model.routing_trace", {}, "replayed routing for experiments: a load file or a directory of them (CSV, or "
           "SmartMoE's table_iter<N>_rank<R>.log: the files of one iteration's ranks are summed into that "
           "iteration's global counts), relative to the job file; each step's expert counts are the trace's, layer "
           "by layer, moving through its recorded steps (empty: the gate routes)",
           [](JobConfig& j) -> std::string& { return j.model.routing_trace; }),
      integer("model.routing_every", 1, 1e9, "steps per recorded step of model.routing_trace",
              [](JobConfig& j) -> int64_t& { return j.model.routing_every; }),
      integer("model.expert_ffn", 0, 1 << 20, "each expert's hidden width (0: 4 d_model; smaller for fine-grained "
              "experts)", [](JobConfig& j) -> int64_t& { return j.model.expert_ffn; }),
      integer("model.kv_heads", 0, 1024, "moe-llama: key/value heads of grouped-query attention (dividing "
              "model.heads; 0: model.heads)", [](JobConfig& j) -> int64_t& { return j.model.kv_heads; }),
      integer("model.shared_experts", 0, 64, "moe-llama: always-active experts beside the routed ones, each "
              "model.expert_ffn wide (held by every worker, like attention)",
              [](JobConfig& j) -> int64_t& { return j.model.shared_experts; }),
      flag("model.tied_head", "moe-llama: the LM head is the token embedding (false: a matrix of its own)",
           [](JobConfig& j) -> bool& { return j.model.tied_head; }),
      text("model.router", {"softmax", "sigmoid"}, "moe-llama: the router's scores: softmax over the experts, or "
           "each expert's sigmoid (DeepSeek-V3)", [](JobConfig& j) -> std::string& { return j.model.router; }),
      flag("model.norm_topk", "moe-llama: renormalise the k chosen scores to sum to 1",
           [](JobConfig& j) -> bool& { return j.model.norm_topk; }),
      number("model.z_loss_weight", 0, 10, "moe-llama: router z-loss weight (mean of logsumexp(logits)^2)",
             [](JobConfig& j) -> double& { return j.model.z_loss_weight; }),
      number("model.bias_update", 0, 1, "moe-llama: DeepSeek-V3's auxiliary-loss-free balancing: each gate gets a "
             "per-expert routing bias that moves this much a step toward the mean load (0: no bias)",
             [](JobConfig& j) -> double& { return j.model.bias_update; }),
      flag("model.qk_norm", "moe-llama: RMSNorm on the queries and on the keys before the rotary positions, each "
           "with a gain of its own (OLMoE's QK-norm)", [](JobConfig& j) -> bool& { return j.model.qk_norm; }),
      flag("model.attn_bias", "moe-llama: biases on the query, key and value projections (Qwen2-MoE's)",
           [](JobConfig& j) -> bool& { return j.model.attn_bias; }),
      flag("model.shared_gate", "moe-llama: the shared experts' output scaled per token by sigmoid(x . w), w learned "
           "(Qwen2-MoE's shared_expert_gate; needs model.shared_experts)",
           [](JobConfig& j) -> bool& { return j.model.shared_gate; }),
      integer("model.rope_theta", 1, 1e9, "moe-llama: the rotary embeddings' base",
              [](JobConfig& j) -> int64_t& { return j.model.rope_theta; }),
      number("model.norm_eps", 1e-12, 1, "moe-llama: RMSNorm's epsilon",
             [](JobConfig& j) -> double& { return j.model.norm_eps; }),
      text("data.path", {}, "training text (bytes) or a file of token ids (uint16, uint32), relative to the job file",
           [](JobConfig& j) -> std::string& { return j.data.path; }),
      text("data.format", {"bytes", "uint16", "uint32"}, "how data.path is tokenised: bytes, or little-endian ids of "
           "2 or 4 bytes (`salamander data prepare` writes them; model.vocab above the largest id)",
           [](JobConfig& j) -> std::string& { return j.data.format; }),
      text("data.tokenizer", {}, "the sentencepiece model that made data.path's ids, relative to the job file: "
           "`salamander sample` writes and reads text through it (\"\": none)",
           [](JobConfig& j) -> std::string& { return j.data.tokenizer; }),
      number("data.validation", 0, 0.5, "the fraction of the corpus held out for the validation loss: its last part "
             "(training batches come from the rest; 0: none)",
             [](JobConfig& j) -> double& { return j.data.validation; }),
      integer("train.eval_every", 0, 1e9, "steps between validation losses: every worker evaluates its part of the "
              "validation set, forward only, with the weights the step begins from (metrics.csv val_loss; needs "
              "data.validation; 0: none)",
              [](JobConfig& j) -> int64_t& { return j.train.eval_every; }),
      integer("train.eval_sequences", 0, 1 << 24, "sequences of the validation set, a fixed list drawn from the "
              "held-out part by the seed (0: train.batch)",
              [](JobConfig& j) -> int64_t& { return j.train.eval_sequences; }),
      integer("train.steps", 0, 1e12, "steps to run (0: none, the job idles until stopped)",
              [](JobConfig& j) -> int64_t& { return j.train.steps; }),
      integer("train.batch", 1, 1 << 24, "global batch in sequences (independent of membership)",
              [](JobConfig& j) -> int64_t& { return j.train.batch; }),
      integer("train.micro_batch", 0, 1 << 24, "sequences per forward and backward pass on a worker: its share of "
              "the batch in passes of this many, the gradients accumulated (0: the whole share at once)",
              [](JobConfig& j) -> int64_t& { return j.train.micro_batch; }),
      number("train.lr", 0, 10, "peak learning rate (AdamW)",
             [](JobConfig& j) -> double& { return j.train.lr; }),
      integer("train.warmup", 0, 1e9, "linear warmup steps before cosine decay",
              [](JobConfig& j) -> int64_t& { return j.train.warmup; }),
      number("train.weight_decay", 0, 10, "AdamW weight decay",
             [](JobConfig& j) -> double& { return j.train.weight_decay; }),
      number("train.clip", 0, 1e9, "global gradient-norm clip (0: off)",
             [](JobConfig& j) -> double& { return j.train.clip; }),
      integer("train.seed", 0, 9e15, "seed: the batch of step s is a function of (seed, s)",
              [](JobConfig& j) -> int64_t& { return j.train.seed; }),
      integer("train.rebalance_every", 0, 1e9, "steps between re-plans on the recent expert loads (0: only on "
              "membership changes and job.rebalance())",
              [](JobConfig& j) -> int64_t& { return j.train.rebalance_every; }),
      integer("train.threads", 1, 256, "compute (BLAS) threads per worker",
              [](JobConfig& j) -> int64_t& { return j.train.threads; }),
      integer("train.checkpoint_every", 0, 1e9, "steps between asynchronous dense snapshots persisted to "
              "<run>/snapshots (the fallback when an expert loses every replica; 0: none, restore from the seed)",
              [](JobConfig& j) -> int64_t& { return j.train.checkpoint_every; }),
      integer("train.peer_copies", 0, 64, "nodes holding each slice of the sparse snapshots (MoEtion, the "
              "checkpoint policy's window) in their agent's memory, the first away from the writer's experts (0: no "
              "sparse snapshots are taken at all, and the ladder has no sparse rung; the baselines, train.recovery = "
              "fixed-ep-ft or checkpoint-restart, take none whatever this says: the systems they stand for have no "
              "sparse snapshots, and their ladder no sparse rung)",
              [](JobConfig& j) -> int64_t& { return j.train.peer_copies; }),
      integer("train.peer_memory_mb", 1, 1e9, "what each agent may hold of other workers' sparse snapshot slices "
              "(MiB); a slice past it is refused, with an event, and the windows held are kept",
              [](JobConfig& j) -> int64_t& { return j.train.peer_memory_mb; }),
      number("train.snapshot_cpu_share", 0, 1, "on CPU workers, the share of an iteration the sparse snapshots' "
             "whole path may take: the writer's copy, checksum, encoding, MAC and sends (its thread's CPU, measured), "
             "its ZeroMQ thread and each peer's receipt (counted from it: 5x it with 2 peers, as measured on CPU); "
             "the checkpoint policy's bandwidth is cut to fit, so its window grows (0: only the writer's copy "
             "counts, as MoEtion sizes it for a GPU's device-to-host copy overlapping the compute; on CPU workers a "
             "window of 1 can then take a third of the throughput)",
             [](JobConfig& j) -> double& { return j.train.snapshot_cpu_share; }),
      flag("train.expert_logs", "MoEtion's upstream logs: each worker puts what it dispatched to each expert (the "
           "rows and their output gradients) to its slice peers every step, so that an expert that lost every holder "
           "is rebuilt alone from its sparse snapshot and the logs, nobody rolling back; it costs every step about "
           "as much traffic as the all-to-alls again, per peer (false: the sparse rung rolls the whole model back "
           "instead)",
           [](JobConfig& j) -> bool& { return j.train.expert_logs; }),
      integer("train.log_copies", 0, 64, "with train.expert_logs, how many of a worker's slice peers hold each of "
              "its upstream logs: the first ones, which hold none of the experts the worker holds where such a node "
              "exists (0: every one, train.peer_copies; at most that). Each copy costs the writer and its holder the "
              "log's sending and receipt every step (the drill job, 8 CPU workers at 0.22 of a CPU: the logs to 2 "
              "peers take the run 1.10x as long as none, to 1 peer about 1.07x); but the logs are needed when an expert lost every "
              "holder, and a log's one copy (on a node holding none of its writer's experts) is then often on a node "
              "lost with them: that rebuild fails and the sparse rung rolls back instead",
              [](JobConfig& j) -> int64_t& { return j.train.log_copies; }),
      flag("train.warm_up", "a new CPU worker, while it waits for a plan, faults in the heap a step of its share "
           "of the batch needs, then makes one pass (forward, backward, update) of a small copy of the model on "
           "that share, so that its first step in the job runs at a steady step's speed instead of about twice it "
           "(a plan's request stops it within a heap block or a layer)",
           [](JobConfig& j) -> bool& { return j.train.warm_up; }),
      text("train.recovery", {"elastic", "fixed-ep-ft", "checkpoint-restart"},
           "how failures are survived: elastic (Salamander), or the baselines fixed-ep-ft (fixed expert-parallel "
           "groups, no restart while a whole group survives) and checkpoint-restart (restore on every change)",
           [](JobConfig& j) -> std::string& { return j.train.recovery; }),
      text("train.restart", {"relaunch", "in-place"},
           "how the baselines (fixed-ep-ft, checkpoint-restart) restore a checkpoint: relaunch (as the systems they "
           "stand for restart a job: every worker of the plan starts again as a new process, loads the job, connects "
           "and reads the snapshot) or in-place (the running workers read it; an upper bound of those baselines). "
           "Elastic mode's restores are always in place",
           [](JobConfig& j) -> std::string& { return j.train.restart; }),
      integer("train.digest_every", 0, 1e9, "steps between digests of every unit each worker holds (weights and "
              "optimizer moments), compared across the unit's holders before the step commits: a copy that disagrees "
              "with the majority is repaired from it and the step runs again (docs/health.md; 0: none)",
              [](JobConfig& j) -> int64_t& { return j.train.digest_every; }),
      text("train.dispatch", {"counts", "even"},
           "how the flexible dispatcher splits each expert's tokens over its replicas: by the step's counts "
           "(each expert's tokens to the least loaded of its holders given the layer's other experts; never a "
           "busier worker than even) or evenly (Lazarus's split)",
           [](JobConfig& j) -> std::string& { return j.train.dispatch; }),
      flag("train.shadow_experts", "FasterMoE's shadowed experts: where one step sends most of a layer's tokens to "
           "a few experts, their weights go to every worker with tokens for them, each computes its own, and the "
           "weight gradients return to a holder (CPU workers). The same sums in another "
           "order, so a job that shadows is not bit for bit one that does not",
           [](JobConfig& j) -> bool& { return j.train.shadow_experts; }),
      integer("train.record_routing", 0, 1e9, "steps between records of the job's routing, every layer's "
              "token-to-expert counts of the global batch, as RUN/routing/table_iter<step>.log (the SmartMoE "
              "format model.routing_trace replays; 0: none)",
              [](JobConfig& j) -> int64_t& { return j.train.record_routing; }),
            integer("parallel.groups", 1, 1024, "data-parallel groups G: each a whole model (an expert-parallel mesh "
              "with its own allocation, placement and recovery) over workers / G of the workers; the global batch "
              "is split into G shard types that the redundancy policy stacks over the groups (must divide the "
              "workers, mesh.nodes x devices)",
              [](JobConfig& j) -> int64_t& { return j.parallel.groups; }),
      integer("parallel.redundancy", 0, 64, "r: shard types each group hosts (SPARe's stacks; 0: the redundancy "
              "policy chooses, spare r* = floor(log2 G + 0.833)); spare needs r(r-1) <= G-1 (a cyclic Golomb "
              "ruler), replication r <= G",
              [](JobConfig& j) -> int64_t& { return j.parallel.redundancy; }),
      integer("mesh.nodes", 1, 1024, "local agents `salamander run` starts",
              [](JobConfig& j) -> int64_t& { return j.mesh.nodes; }),
      text("mesh.devices", {}, "devices per node: cpu:K or cuda:I[,J...]",
           [](JobConfig& j) -> std::string& { return j.mesh.devices; }),
      integer("mesh.heartbeat_ms", 10, 60000, "agent heartbeat interval",
              [](JobConfig& j) -> int64_t& { return j.mesh.heartbeat_ms; }),
      integer("mesh.miss_limit", 1, 100, "missed heartbeats before a silent node is dead",
              [](JobConfig& j) -> int64_t& { return j.mesh.miss_limit; }),
      text("mesh.bind", {}, "controller's mesh endpoint (loopback unless CURVE keys are set)",
           [](JobConfig& j) -> std::string& { return j.mesh.bind; }),
      integer("mesh.join_window_ms", 0, 3600000, "the first plan waits for mesh.nodes x devices workers, "
              "or this long after the first is ready",
              [](JobConfig& j) -> int64_t& { return j.mesh.join_window_ms; }),
      integer("mesh.join_batch_ms", 0, 3600000, "after the first plan, workers that join are taken into a new plan "
              "(at a step boundary) once the first of them has waited this long, so arrivals close together cost one "
              "re-plan (Lazarus used 2 minutes); losses re-plan at once",
              [](JobConfig& j) -> int64_t& { return j.mesh.join_batch_ms; }),
      integer("mesh.capacity_wait_ms", 0, 7 * 86400000LL, "when the workers left cannot hold a plan (too few slots for "
              "every expert, or too few for a fixed group, or no worker left), the job waits for capacity and says "
              "so; it ends, failed, after waiting this long without a plan (0: it waits for workers without end)",
              [](JobConfig& j) -> int64_t& { return j.mesh.capacity_wait_ms; }),
      integer("mesh.worker_restarts", 0, 1000, "an agent starts a new worker in the place of one that crashed (killed, "
              "or unresponsive) after it was ready, up to this many times in a row per device (a worker that ran 10 "
              "minutes resets the count), after a pause of 0.5 s doubled at each restart; the new worker joins the "
              "job like a new node's (0: never)",
              [](JobConfig& j) -> int64_t& { return j.mesh.worker_restarts; }),
      text("mesh.racks", {}, "racks, a failure domain above the host: \"RACK: NODE NODE ...; RACK: ...\" with the "
           "nodes' names (an agent's --name; local agents are node0, node1, ...); plans spread each expert's "
           "replicas over racks before hosts, and job.plan() says P(k) over racks (\"\": none)",
           [](JobConfig& j) -> std::string& { return j.mesh.racks; }),
      integer("mesh.controller_grace_ms", 1000, 86400000, "agents and their workers ride out a silent controller "
              "this long (a controller restarting from its journal: `salamander controller --resume`); cut off for "
              "the liveness window, a node stops stepping at once",
              [](JobConfig& j) -> int64_t& { return j.mesh.controller_grace_ms; }),
      text("repl.bind", {}, "REPL endpoint (loopback unless CURVE keys are set)",
           [](JobConfig& j) -> std::string& { return j.repl.bind; }),
      integer("repl.budget_ms", 10, 600000, "wall-clock limit of one REPL evaluation",
              [](JobConfig& j) -> int64_t& { return j.repl.budget_ms; }),
      integer("repl.memory_mb", 1, 4096, "Lua memory cap per REPL session",
              [](JobConfig& j) -> int64_t& { return j.repl.memory_mb; }),
      integer("repl.max_sessions", 1, 1024, "concurrent REPL sessions (oldest idle is dropped)",
              [](JobConfig& j) -> int64_t& { return j.repl.max_sessions; }),
      text("metrics.bind", {}, "the Prometheus endpoint (HTTP GET /metrics): tcp://HOST:PORT, PORT * for any free "
           "port, or a bare PORT on loopback; \"\" (the default): off. Beyond loopback it needs metrics.token or "
           "metrics.users",
           [](JobConfig& j) -> std::string& { return j.metrics.bind; }),
      text("metrics.token", {}, "file holding the bearer token a scraper must send (Authorization: Bearer ...)",
           [](JobConfig& j) -> std::string& { return j.metrics.token; }),
      text("metrics.users", {}, "file of '<name> <password>' lines: users a scraper may authenticate as (basic auth)",
           [](JobConfig& j) -> std::string& { return j.metrics.users; }),
      text("metrics.tls", {}, "PEM file with the certificate (chain) and its private key: serve HTTPS",
           [](JobConfig& j) -> std::string& { return j.metrics.tls; }),
      text("security.server_key", {}, "file holding the controller's CURVE secret key",
           [](JobConfig& j) -> std::string& { return j.security.server_key; }),
      text("security.allow", {}, "allowlist file: '<public key> <role> <name>' per line",
           [](JobConfig& j) -> std::string& { return j.security.allow; }),
      flag("security.private_network",
           "the workers' data hosts are on a network no stranger reaches: the data plane (Gloo's TCP pairs, not "
           "authenticated) may listen beyond loopback",
           [](JobConfig& j) -> bool& { return j.security.private_network; }),
      flag("faults.inject", "allow a drill's fault injectors (corrupt{}, which flips bits of a worker's copy of a "
           "unit); a drill that uses one is refused without it",
           [](JobConfig& j) -> bool& { return j.faults.inject; }),
            text("policies.allocation", {}, "allocation policy: a name in policies/allocation or a .lua path",
           [](JobConfig& j) -> std::string& { return j.policies.allocation; }),
      text("policies.placement", {}, "placement policy: a name in policies/placement or a .lua path",
           [](JobConfig& j) -> std::string& { return j.policies.placement; }),
      text("policies.checkpoint", {}, "checkpoint-window policy (name or .lua path)",
           [](JobConfig& j) -> std::string& { return j.policies.checkpoint; }),
      text("policies.redundancy", {}, "redundancy policy (name or .lua path)",
           [](JobConfig& j) -> std::string& { return j.policies.redundancy; }),
      text("policies.health", {}, "health policy: what to do about a slow worker (name or .lua path)",
           [](JobConfig& j) -> std::string& { return j.policies.health; }),
      integer("policies.min_replicas", 1, 64, "f: replicas every expert keeps at least",
              [](JobConfig& j) -> int64_t& { return j.policies.min_replicas; }),
      integer("policies.slots", 1, 1024, "expert slots per worker",
              [](JobConfig& j) -> int64_t& { return j.policies.slots; }),
      integer("policies.budget_ms", 1, 600000, "wall-clock limit of one call into a policy",
              [](JobConfig& j) -> int64_t& { return j.policies.budget_ms; }),
      integer("policies.memory_mb", 1, 4096, "Lua memory cap of each policy generation",
              [](JobConfig& j) -> int64_t& { return j.policies.memory_mb; }),
      number("policies.node_mtbf_h", 0, 1e9,
             "mean hours between failures of one node, which the placement weighs survival by (0: measured from "
             "the job's node losses; until one is seen, assumed 5000 h)",
             [](JobConfig& j) -> double& { return j.policies.node_mtbf_h; }),
      number("policies.correlated_failures", 0, 1,
             "probability that a node loss takes another node with it (a shared switch, a spot reclaim), for the "
             "placement's expected goodput",
             [](JobConfig& j) -> double& { return j.policies.correlated_failures; }),
  };
  return kFields;
}

bool is_section(const std::string& path) {
  for (const auto& f : fields())
    if (f.key.rfind(path + ".", 0) == 0) return true;
  return false;
}

// Names valid directly under `prefix` ("" for the top level).
std::vector<std::string> names_under(const std::string& prefix) {
  std::set<std::string> out;
  for (const auto& f : fields()) {
    std::string rest;
    if (prefix.empty()) {
      rest = f.key;
    } else if (f.key.rfind(prefix + ".", 0) == 0) {
      rest = f.key.substr(prefix.size() + 1);
    } else {
      continue;
    }
    out.insert(rest.substr(0, rest.find('.')));
  }
  return {out.begin(), out.end()};
}

const Field* find_field(const std::string& key) {
  for (const auto& f : fields())
    if (f.key == key) return &f;
  return nullptr;
}

std::string describe_lua(lua_State* L, int idx) {
  switch (lua_type(L, idx)) {
    case LUA_TSTRING: return "\"" + clip(lua_tostring(L, idx), 60) + "\"";
    case LUA_TNUMBER: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.14g", lua_tonumber(L, idx));
      return buf;
    }
    case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? "true" : "false";
    default: return std::string("a ") + luaL_typename(L, idx);
  }
}

std::string range_text(double lo, double hi) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "[%.14g, %.14g]", lo, hi);
  return buf;
}

Status set_value(const Field& f, JobConfig& job, lua_State* L, int idx) {
  Ref r = f.ref(job);
  if (auto* p = std::get_if<int64_t*>(&r)) {
    double x = lua_type(L, idx) == LUA_TNUMBER ? lua_tonumber(L, idx) : NAN;
    if (lua_type(L, idx) != LUA_TNUMBER || x != std::floor(x) || x < f.lo || x > f.hi)
      return fail("expected an integer in ", range_text(f.lo, f.hi), ", got ", describe_lua(L, idx));
    **p = int64_t(x);
  } else if (auto* p = std::get_if<double*>(&r)) {
    double x = lua_tonumber(L, idx);
    if (lua_type(L, idx) != LUA_TNUMBER || !std::isfinite(x) || x < f.lo || x > f.hi)
      return fail("expected a number in ", range_text(f.lo, f.hi), ", got ", describe_lua(L, idx));
    **p = x;
  } else if (auto* p = std::get_if<bool*>(&r)) {
    if (lua_type(L, idx) != LUA_TBOOLEAN) return fail("expected true or false, got ", describe_lua(L, idx));
    **p = lua_toboolean(L, idx);
  } else {
    auto* s = std::get<std::string*>(r);
    if (lua_type(L, idx) != LUA_TSTRING)
      return fail("expected a string, got ", describe_lua(L, idx));
    std::string v = lua_tostring(L, idx);
    if (!f.choices.empty() &&
        std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
      return fail("expected one of ", join(f.choices, ", "), ", got \"", v, "\"");
    *s = v;
  }
  return {};
}

// Walks the table at idx whose dotted path is `prefix`, adding one line to `errors` per key that
// breaks a rule (every one, not only the first).
void walk(lua_State* L, int idx, const std::string& prefix, JobConfig& job, std::vector<std::string>& errors) {
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      std::string where = prefix.empty() ? "the top level" : prefix;
      errors.push_back(where + ": key " + describe_lua(L, -2) + " is not a name (expected key = value)");
      lua_pop(L, 1);
      continue;
    }
    std::string key = lua_tostring(L, -2);
    std::string path = prefix.empty() ? key : prefix + "." + key;
    int value = lua_gettop(L);
    Status s;
    if (is_section(path)) {
      if (lua_type(L, value) != LUA_TTABLE) {
        s = fail(path, ": expected a table of settings, got ", describe_lua(L, value));
      } else {
        walk(L, value, path, job, errors);
      }
    } else if (const Field* f = find_field(path)) {
      s = set_value(*f, job, L, value);
      if (!s) s = Error(path + ": " + s.error().message());
    } else {
      s = fail(path, ": unknown key", did_you_mean(key, names_under(prefix)),
               "; valid here: ", join(names_under(prefix), ", "));
    }
    lua_pop(L, 1);
    if (!s) errors.push_back(s.error().message());
  }
}

bool valid_endpoint(const std::string& ep) {
  return ep.rfind("tcp://", 0) == 0 || ep.rfind("ipc://", 0) == 0 ||
         ep.rfind("inproc://", 0) == 0;
}

bool valid_policy_ref(const std::string& v) {
  if (v.size() > 4 && v.substr(v.size() - 4) == ".lua") return true;
  if (v.empty()) return false;
  for (unsigned char c : v)
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  return true;
}

// The parallel shape against the workers the job starts with and the redundancy it asks for.
void parallel_checks(const JobConfig& j, int64_t workers, std::vector<std::string>& errors) {
  const int64_t g = j.parallel.groups, r = j.parallel.redundancy;
  if (workers % g != 0)
    errors.push_back("parallel.groups: " + std::to_string(g) + " groups do not divide the " + std::to_string(workers) +
                     " workers (mesh.nodes = " + std::to_string(j.mesh.nodes) + " x mesh.devices = \"" +
                     j.mesh.devices + "\")");
  if (g > 1 && workers % g == 0 && (workers / g) * j.policies.slots < j.model.experts)
    errors.push_back("parallel.groups: a group of " + std::to_string(workers / g) + " worker(s) x policies.slots = " +
                     std::to_string(j.policies.slots) + " cannot hold the " + std::to_string(j.model.experts) +
                     " experts of a whole model once");
  if (g > 1 && j.train.recovery != "elastic")
    errors.push_back("parallel.groups: groups recover the elastic way; train.recovery = \"" + j.train.recovery +
                     "\" is a single-group baseline");
  if (r > g)
    errors.push_back("parallel.redundancy: r = " + std::to_string(r) + " is more than the " + std::to_string(g) +
                     " shard types (parallel.groups)");
  else if (j.policies.redundancy == "spare" && r > 1 && r * (r - 1) > g - 1)
    errors.push_back("parallel.redundancy: spare cannot stack r = " + std::to_string(r) + " shard types over " +
                     std::to_string(g) + " groups: a cyclic Golomb ruler of r marks needs r(r-1) = " +
                     std::to_string(r * (r - 1)) + " <= groups - 1 = " + std::to_string(g - 1));
}

// The upstream logs go to the first train.log_copies of the train.peer_copies slice peers.
void log_checks(const JobConfig& j, std::vector<std::string>& errors) {
  if (!j.train.expert_logs || j.train.peer_copies == 0 || j.train.log_copies <= j.train.peer_copies) return;  // 0: all
  errors.push_back("train.log_copies: " + std::to_string(j.train.log_copies) + " is above train.peer_copies = " +
                   std::to_string(j.train.peer_copies) + ": the upstream logs go to the slice peers");
}

// The validation loss: a part held out to evaluate on, and workers that can (CPU, one group).
void validation_checks(const JobConfig& j, std::vector<std::string>& errors) {
  if (j.train.eval_every == 0) return;
  if (j.data.validation <= 0)
    errors.push_back("train.eval_every: " + std::to_string(j.train.eval_every) +
                     " needs a validation split: set data.validation (the fraction of the corpus held out, e.g. 0.05)");
  if (j.mesh.devices.rfind("cuda", 0) == 0)
    errors.push_back("train.eval_every: validation runs on CPU workers only (mesh.devices = \"" + j.mesh.devices + "\")");
}

// The keys one family has and the other lacks, and the shapes moe-llama's operators need.
void family_checks(const JobConfig& j, std::vector<std::string>& errors) {
  const ModelConfig& m = j.model;
  if (m.kind != "moe-llama") {
    ModelConfig d;
    auto only = [&](bool set, const char* key) {
      if (set) errors.push_back(std::string(key) + ": a moe-llama key; model.kind is \"" + m.kind + "\"");
    };
    only(m.kv_heads != d.kv_heads, "model.kv_heads");
    only(m.shared_experts != d.shared_experts, "model.shared_experts");
    only(m.tied_head != d.tied_head, "model.tied_head");
    only(m.router != d.router, "model.router");
    only(m.norm_topk != d.norm_topk, "model.norm_topk");
    only(m.z_loss_weight != d.z_loss_weight, "model.z_loss_weight");
    only(m.bias_update != d.bias_update, "model.bias_update");
    only(m.qk_norm != d.qk_norm, "model.qk_norm");
    only(m.attn_bias != d.attn_bias, "model.attn_bias");
    only(m.shared_gate != d.shared_gate, "model.shared_gate");
    only(m.rope_theta != d.rope_theta, "model.rope_theta");
    only(m.norm_eps != d.norm_eps, "model.norm_eps");
    return;
  }
  if (m.heads > 0 && m.d_model % m.heads == 0 && (m.d_model / m.heads) % 2 != 0)
    errors.push_back("model.heads: moe-llama's rotary embeddings need an even head size, and d_model / heads = " +
                     std::to_string(m.d_model / m.heads));
  if (m.kv_heads > 0 && m.heads % m.kv_heads != 0)
    errors.push_back("model.kv_heads: " + std::to_string(m.kv_heads) + " does not divide model.heads = " +
                     std::to_string(m.heads));
  if (m.shared_gate && m.shared_experts == 0)
    errors.push_back("model.shared_gate: gates the shared experts, and model.shared_experts is 0");
  if (j.mesh.devices.rfind("cuda", 0) == 0 && m.bias_update > 0)
    errors.push_back("model.bias_update: DeepSeek-V3's routing bias runs on CPU workers only for now "
                     "(mesh.devices = \"" + j.mesh.devices + "\")");
  if (m.skew != 1 || !m.routing_trace.empty())
    errors.push_back("model.kind: forced and replayed routing (model.skew, model.routing_trace) are moe-gpt "
                     "experiments; moe-llama's router always routes");
}

// Gradient accumulation: what it is built for.
void micro_batch_checks(const JobConfig& j, std::vector<std::string>& errors) {
  if (j.train.micro_batch == 0) return;
  if (j.train.micro_batch >= j.train.batch)
    errors.push_back("train.micro_batch: " + std::to_string(j.train.micro_batch) + " is not below train.batch = " +
                     std::to_string(j.train.batch) + " (0: no micro-batches)");
  if (j.parallel.groups > 1)
    errors.push_back("train.micro_batch: micro-batches with data-parallel groups (parallel.groups = " +
                     std::to_string(j.parallel.groups) + ") are not built yet");
  if (j.mesh.devices.rfind("cuda", 0) == 0)
    errors.push_back("train.micro_batch: micro-batches run on CPU workers only for now (mesh.devices = \"" +
                     j.mesh.devices + "\")");
}

// The rules that tie keys together; one line per rule broken.
void cross_checks(const JobConfig& j, std::vector<std::string>& errors) {
  auto add = [&errors](const Error& e) { errors.push_back(e.message()); };
  if (j.model.d_model % j.model.heads != 0)
    add(fail("model.heads: ", j.model.heads, " does not divide model.d_model = ", j.model.d_model));
  if (j.model.top_k > j.model.experts)
    add(fail("model.top_k: ", j.model.top_k, " is more than model.experts = ", j.model.experts));
  if (j.model.top_k > kGpuMaxTopK && j.mesh.devices.rfind("cuda", 0) == 0)
    add(fail("model.top_k: GPU workers route a token to at most ", kGpuMaxTopK, " experts, and top_k = ", j.model.top_k,
             " (mesh.devices = \"", j.mesh.devices, "\")"));
  if (j.model.hot_experts > j.model.experts)
    add(fail("model.hot_experts: ", j.model.hot_experts, " is more than model.experts = ", j.model.experts));
  if (j.data.path.empty()) add(fail("data.path: empty (a text file, a directory of text files, or a uint16 token file)"));
  if (j.data.format == "bytes" && j.model.vocab != 256)
    add(fail("model.vocab: byte-level data (data.format = \"bytes\") needs vocab = 256, got ", j.model.vocab));
  if (j.data.format == "bytes" && !j.data.tokenizer.empty())
    add(fail("data.tokenizer: byte-level data (data.format = \"bytes\") has no tokenizer; it goes with token ids "
             "(data.format = \"uint16\" or \"uint32\")"));
  if (j.data.format == "uint16" && j.model.vocab > 65536)
    add(fail("model.vocab: ", j.model.vocab, " ids do not fit data.format = \"uint16\" (at most 65536): ids of a "
             "larger vocabulary are uint32"));
  if (auto w = starting_workers(j); !w) add(w.error());
  else parallel_checks(j, *w, errors);
  if (auto r = parse_racks(j.mesh.racks); !r) add(Error("mesh.racks: " + r.error().message()));
  validation_checks(j, errors);
  log_checks(j, errors);
  family_checks(j, errors);
  micro_batch_checks(j, errors);
  for (auto [key, ep] : {std::pair{"mesh.bind", j.mesh.bind}, std::pair{"repl.bind", j.repl.bind}})
    if (!valid_endpoint(ep))
      add(fail(key, ": \"", ep, "\" is not an endpoint (expected tcp://HOST:PORT or ipc://PATH)"));
  if (!j.metrics.bind.empty())
    if (auto b = parse_http_bind(j.metrics.bind); !b) add(Error("metrics.bind: " + b.error().message()));
  for (auto [key, v] : {std::pair{"policies.allocation", j.policies.allocation},
                        std::pair{"policies.placement", j.policies.placement},
                        std::pair{"policies.checkpoint", j.policies.checkpoint},
                        std::pair{"policies.redundancy", j.policies.redundancy}})
    if (!valid_policy_ref(v)) add(fail(key, ": \"", v, "\" is neither a policy name ([A-Za-z0-9_-]) nor a .lua path"));
  if (j.security.server_key.empty() != j.security.allow.empty())
    add(fail("security: server_key and allow go together (CURVE needs the server's key and ",
             "the allowlist of client keys)"));
}

// A number's or a boolean's value as text (numbers as %g); nothing for a string.
std::optional<std::string> scalar_text(const Ref& r) {
  if (auto* p = std::get_if<int64_t*>(&r)) return std::to_string(**p);
  if (auto* p = std::get_if<double*>(&r)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", **p);
    return buf;
  }
  if (auto* p = std::get_if<bool*>(&r)) return **p ? "true" : "false";
  return std::nullopt;
}

std::string default_text(const Field& f) {
  JobConfig d;
  Ref r = f.ref(d);
  if (auto t = scalar_text(r)) return *t;
  return "\"" + *std::get<std::string*>(r) + "\"";
}

std::string rule_text(const Field& f) {
  JobConfig d;
  Ref r = f.ref(d);
  if (std::holds_alternative<int64_t*>(r)) return "integer in " + range_text(f.lo, f.hi);
  if (std::holds_alternative<double*>(r)) return "number in " + range_text(f.lo, f.hi);
  if (std::holds_alternative<bool*>(r)) return "true or false";
  if (!f.choices.empty()) return "one of " + join(f.choices, ", ");
  return "string";
}

// Keys whose value is a file, resolved against the job file's directory (a policy only when it is
// a .lua path, not a name).
bool is_path_key(const std::string& key, const std::string& value) {
  static const std::set<std::string> kPaths = {"data.path", "data.tokenizer", "security.server_key", "security.allow",
                                                "metrics.token", "metrics.users", "metrics.tls"};
  if (kPaths.count(key)) return true;
  return key.rfind("policies.", 0) == 0 && value.size() > 4 && value.compare(value.size() - 4, 4, ".lua") == 0;
}

// A key's value in `job` as text: numbers as %g, strings bare, paths resolved.
std::string value_text(const Field& f, const JobConfig& job) {
  JobConfig copy = job;
  Ref r = f.ref(copy);
  if (auto t = scalar_text(r)) return *t;
  const std::string& v = *std::get<std::string*>(r);
  return is_path_key(f.key, v) ? resolve_path(job, v) : v;
}

}  // namespace

std::vector<KeyChange> differences(const JobConfig& before, const JobConfig& after) {
  std::vector<KeyChange> out;
  for (const Field& f : fields()) {
    std::string a = value_text(f, before), b = value_text(f, after);
    if (a != b) out.push_back({f.key, std::move(a), std::move(b)});
  }
  return out;
}

Status validate_table(lua_State* L, int idx, JobConfig& job) {
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (lua_type(L, idx) != LUA_TTABLE)
    return fail("the file must return a table (return { model = {...}, mesh = {...}, ... }), got ",
                describe_lua(L, idx));
  std::vector<std::string> errors;
  walk(L, idx, "", job, errors);
  // Rules between keys are checked once every key is valid (on a key that failed they would
  // judge its default, not what the file said).
  if (errors.empty()) cross_checks(job, errors);
  if (errors.empty()) return {};
  return Error(join(errors, "\n"));
}

std::string schema_table(bool markdown) {
  std::string out;
  if (markdown) out += "| key | rule | default | meaning |\n| --- | --- | --- | --- |\n";
  for (const auto& f : fields()) {
    if (markdown) {
      out += "| `" + f.key + "` | " + rule_text(f) + " | `" + default_text(f) + "` | " + f.doc +
             " |\n";
    } else {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%-22s %-32s %-22s %s\n", f.key.c_str(),
                    rule_text(f).c_str(), default_text(f).c_str(), f.doc.c_str());
      out += buf;
    }
  }
  return out;
}

}  // namespace sal::job
