// config.h — a job: what to train (model, data, train), where (mesh), how it is operated (repl,
// security), and which policy fills each slot. Loaded from a Lua job file (scripts/jobs/*.lua)
// that returns a table; every key is checked against the schema in schema.cpp, which is also what
// `salamander job schema` prints and docs/job-file.md lists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_shape.h"
#include "core/result.h"
#include "model/dims.h"  // header only: sal_job does not link the model
#include "job/overrides.h"

namespace sal::job {

struct ModelConfig {
  std::string kind = "moe-gpt";
  int64_t layers = 2;
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t experts = 8;
  int64_t top_k = 2;
  int64_t seq_len = 64;
  int64_t vocab = 256;
  double aux_loss_weight = 0.01;
  double skew = 1;             // routing skew for experiments (1: off)
  int64_t hot_experts = 0;     // how many experts the skew favours
  std::string routing_trace;   // replayed routing for experiments: a load file or directory (model/routing_trace.h)
  int64_t routing_every = 1;   // steps per trace file
  int64_t expert_ffn = 0;      // each expert's hidden width (0: 4 d_model)
  // moe-llama only
  int64_t kv_heads = 0;        // grouped-query attention's key/value heads (0: heads)
  int64_t shared_experts = 0;  // always-active experts beside the routed ones, each expert_ffn wide
  bool tied_head = true;       // the LM head is the token embedding
  std::string router = "softmax";  // softmax | sigmoid
  bool norm_topk = false;      // renormalise the k chosen scores
  double z_loss_weight = 0;    // router z-loss weight
  double bias_update = 0;      // auxiliary-loss-free balancing's bias step (0: no routing bias)
  bool qk_norm = false;        // RMSNorm on the queries and keys (OLMoE's QK-norm)
  bool attn_bias = false;      // biases on the query, key and value projections (Qwen2-MoE's)
  bool shared_gate = false;    // the shared experts' output gated by sigmoid(x . w) (Qwen2-MoE's)
  int64_t rope_theta = 10000;  // rotary embeddings' base
  double norm_eps = 1e-5;      // RMSNorm's epsilon
};

// The operator sizes of the model (the shared description in core/model_shape.h).
inline ModelShape model_shape(const ModelConfig& m) {
  ModelShape s{int(m.layers), int(m.d_model), int(m.experts), int(m.seq_len), int(m.vocab)};
  s.family = m.kind == "moe-llama" ? ModelFamily::llama : ModelFamily::gpt;
  s.expert_ffn = int(m.expert_ffn);
  if (s.llama()) {
    int heads = m.heads > 0 ? int(m.heads) : 1;
    s.kv_dim = m.kv_heads > 0 ? int(m.d_model / heads * m.kv_heads) : 0;
    s.shared_ffn = int(m.shared_experts) * s.ffn();
    s.tied_head = m.tied_head;
    s.router_bias = m.bias_update > 0;
    s.qk_norm = m.qk_norm;
    s.attn_bias = m.attn_bias;
    s.shared_gate = m.shared_gate;
  }
  return s;
}

// The whole model as the model code, the workers and a checkpoint's manifest take it.
inline model::Dims model_dims(const ModelConfig& m) {
  model::Dims d;
  static_cast<ModelShape&>(d) = model_shape(m);
  d.heads = int(m.heads);
  d.top_k = int(m.top_k);
  d.aux_weight = float(m.aux_loss_weight);
  d.skew = float(m.skew);
  d.hot_experts = int(m.hot_experts);
  d.sigmoid_router = m.router == "sigmoid";
  d.norm_topk = m.norm_topk;
  d.z_loss_weight = float(m.z_loss_weight);
  d.bias_update = float(m.bias_update);
  d.rope_theta = int(m.rope_theta);
  d.norm_eps = float(m.norm_eps);
  return d;
}

// The default corpus: the fortune cookie files of Debian's `fortunes` package (plain English
// text; `scripts/dev.sh` installs it).
constexpr const char* kDefaultDataPath = "/usr/share/games/fortunes";

struct DataConfig {
  std::string path = kDefaultDataPath;  // text file or directory (bytes), or a token file; relative to the job file
  std::string format = "bytes";         // bytes | uint16 | uint32 (little-endian ids)
  std::string tokenizer;  // the sentencepiece model that made the ids (sample reads it); relative to the job file
  double validation = 0;  // the corpus's last part held out for the validation loss (0: none)
};

struct TrainConfig {
  int64_t steps = 200;
  int64_t batch = 16;          // global batch in sequences; never changes with membership
  int64_t micro_batch = 0;     // sequences per forward and backward pass on a worker (0: its whole share)
  double lr = 3e-3;
  int64_t warmup = 20;
  double weight_decay = 0.1;
  double clip = 1.0;
  int64_t seed = 1;
  int64_t rebalance_every = 50;  // steps between load-driven re-plans (0: never)
  int64_t threads = 1;           // compute threads per worker
  int64_t checkpoint_every = 50; // steps between dense snapshots (0: none)
  int64_t peer_copies = 2;       // nodes holding each sparse snapshot slice (0: no sparse snapshots in peers)
  int64_t peer_memory_mb = 1024; // what an agent may hold of other workers' slices
  double snapshot_cpu_share = 0; // the share of an iteration a sparse slot's whole path may take (0: the copy only)
  bool expert_logs = false;      // upstream logs of the experts' rows with the slices: a lost expert is rebuilt alone
  int64_t log_copies = 0;        // slice peers each upstream log goes to: the first log_copies (0: all peer_copies)
  std::string recovery = "elastic";  // elastic | fixed-ep-ft | checkpoint-restart
  int64_t digest_every = 1;      // steps between the held units' digests (0: none; docs/health.md)
  std::string dispatch = "counts";  // counts | even: how each expert's tokens are split over its replicas
  bool shadow_experts = false;   // a step's crowded experts computed where their tokens are (runtime/shadows.h)
  int64_t record_routing = 0;    // steps between records of the routing (RUN/routing/; 0: none)
  int64_t eval_every = 0;        // steps between validation losses (0: none; needs data.validation)
  int64_t eval_sequences = 0;    // the validation set's sequences (0: train.batch)
  std::string restart = "relaunch";  // relaunch | in-place: how the baselines restore a checkpoint
  bool warm_up = true;           // a new CPU worker's warm-up pass while it waits for a plan
};

// The job's parallel shape (DESIGN "Parallel shape"): `groups` data-parallel groups, each a whole
// model run as an expert-parallel mesh over its share of the workers; the global batch of a step is
// split into `groups` shard types, which the redundancy policy stacks over the groups (SPARe).
struct ParallelConfig {
  int64_t groups = 1;          // 1: one expert-parallel group over every worker (no data-parallel groups)
  int64_t redundancy = 0;      // r: shard types each group hosts (0: the redundancy policy chooses)
};

struct MeshConfig {
  int64_t nodes = 4;           // local agents `salamander run` starts
  std::string devices = "cpu:1";
  int64_t heartbeat_ms = 100;
  int64_t miss_limit = 3;      // heartbeats missed before a node is dead
  std::string bind = "tcp://127.0.0.1:*";
  int64_t join_window_ms = 5000;  // the first plan waits this long at most for every worker
  int64_t join_batch_ms = 1000;   // later arrivals are batched this long before a re-plan
  int64_t controller_grace_ms = 30000;  // agents ride out a silent controller this long (a restart)
  int64_t capacity_wait_ms = 600000;    // too few workers to plan: the job ends after this long (0: waits on)
  int64_t worker_restarts = 3;          // a worker that crashed after it was ready is started again, per device
  std::string racks;                    // "a: node0 node1; b: node2 node3" (job/racks.h); "": none
};

struct ReplConfig {
  std::string bind = "tcp://127.0.0.1:*";
  int64_t budget_ms = 1000;    // wall-clock limit of one evaluation
  int64_t memory_mb = 64;      // per-session Lua memory cap
  int64_t max_sessions = 32;
};

// The controller's Prometheus endpoint (plain HTTP, read-only): off unless set, because a scrape
// config needs a port chosen in advance and no fixed default is free on every host.
struct MetricsConfig {
  std::string bind;            // "" (off), tcp://HOST:PORT (PORT * for any free one), or a bare PORT (loopback)
  std::string token;           // file: the bearer token a scraper must send (Authorization: Bearer …)
  std::string users;           // file: "<name> <password>" per line, for basic auth
  std::string tls;             // file: PEM certificate chain and private key: serve HTTPS
};

struct SecurityConfig {
  std::string server_key;      // file with the controller's CURVE secret key (Z85)
  std::string allow;           // allowlist file: "<public key> <role> <name>" per line
  // The data plane's Gloo pairs are not authenticated: a worker listens for them beyond loopback
  // only when the job states that its data hosts are on a private network.
  bool private_network = false;
};

struct PolicyConfig {
  std::string allocation = "lazarus";
  std::string placement = "goodput";
  std::string checkpoint = "moetion";
  std::string redundancy = "none";
  std::string health = "lighten";  // what to do about a slow worker (policies/health)
  int64_t min_replicas = 2;    // f: each expert's fault-tolerance floor
  int64_t slots = 4;           // expert slots per worker
  int64_t budget_ms = 500;     // wall-clock limit of one call into a policy
  int64_t memory_mb = 64;      // Lua memory cap per policy generation
  double node_mtbf_h = 0;       // mean hours between failures of one node, for the placement (0: measure)
  double correlated_failures = 0;  // probability that a node loss takes another node with it
};

// Fault injection (a drill's corrupt{}, which flips bits of a worker's copy of a unit): refused
// unless the job says so, so that no drill run against a production job can damage its weights.
struct FaultsConfig {
  bool inject = false;
};

struct JobConfig {
  std::string name;
  std::string file;            // where it came from ("<embedded quickstart>" for the default)
  std::string dir;             // directory relative paths resolve against
  std::string text;            // the job file's text (workers evaluate it too)
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  ParallelConfig parallel;
  MeshConfig mesh;
  ReplConfig repl;
  MetricsConfig metrics;
  SecurityConfig security;
  PolicyConfig policies;
  FaultsConfig faults;
};

// Evaluates a job file in a sandbox and checks it. Errors name the file, the key and the rule:
// "scripts/jobs/x.lua: mesh.heartbeat_ms: expected an integer in [10, 60000], got 5". `sets`
// (--set, overrides.h) are applied to the table the file returns before the check; the job's
// text then carries them.
Result<JobConfig> load_file(const std::string& path, const Overrides& sets = {});
Result<JobConfig> load_text(const std::string& text, const std::string& label,
                            const std::string& dir);

// A path from the job file, resolved against the job file's directory.
std::string resolve_path(const JobConfig& job, const std::string& path);

// That the job's data.path exists on this machine (the controller checks it at start, `job check`
// too): "FILE: data.path: PATH does not exist" otherwise, with the package to install when it is
// the default corpus; that model.routing_trace, if set, reads with model.experts per layer; and that
// data.tokenizer, if set, exists.
Status check_data(const JobConfig& job);

// The workers the job's mesh.nodes agents start: mesh.nodes x the devices of mesh.devices (an
// error naming mesh.devices when it does not parse).
Result<int64_t> starting_workers(const JobConfig& job);

// The nodes holding each slice of the sparse snapshots: train.peer_copies in elastic mode, 0 for the
// baselines (fixed-ep-ft, checkpoint-restart). They stand for systems without sparse snapshots in
// peers' memory, and their ladder has no sparse rung: copies would cost them every step for nothing.
int64_t sparse_peer_copies(const JobConfig& job);
// The slice peers each upstream log goes to: train.log_copies of them (0: every one), at most those.
int64_t upstream_log_copies(const JobConfig& job);

// That the workers a local mesh of job.mesh.nodes agents starts (x the devices of mesh.devices)
// hold every expert once with policies.slots each: `salamander run` checks it for the nodes it will
// start, since no other worker would come and the first plan would wait mesh.capacity_wait_ms for
// nothing. A controller whose agents join from elsewhere may have more than mesh.nodes.
Status check_first_plan(const JobConfig& job);

// The default job compiled into the binary (scripts/jobs/quickstart.lua).
Result<JobConfig> load_embedded_default(const Overrides& sets = {});
const std::string& embedded_default_text();

// A key whose value differs between two jobs: `before` and `after` as text (strings bare; a path
// resolved against its job's directory, so one file named from two places is the same value).
struct KeyChange {
  std::string key, before, after;
};
// Every schema key whose value differs between the two jobs, in the schema's order (`run --resume`
// names them before it trains another job than the one the run recorded).
std::vector<KeyChange> differences(const JobConfig& before, const JobConfig& after);

// The schema as a table (key, type, default, rule, doc) for `salamander job schema` and the docs.
std::string schema_table(bool markdown);

}  // namespace sal::job
