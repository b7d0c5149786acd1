// test_job.cpp — job files: the shipped quickstart is valid, and every kind of mistake is rejected
// with the file, the key and the rule.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "job/config.h"
#include "job/planner_config.h"
#include "job/racks.h"
#include "support/temp_dirs.h"

using namespace sal;
using namespace sal::job;

namespace {

std::string error_of(const std::string& text) {
  auto r = load_text(text, "x.lua", ".");
  REQUIRE_FALSE(r.ok());
  return r.error().message();
}

}  // namespace

TEST_CASE("the shipped quickstart and the embedded default agree and are valid") {
  auto file = load_file(std::string(SAL_SOURCE_DIR) + "/scripts/jobs/quickstart.lua");
  REQUIRE(file.ok());
  auto embedded = load_embedded_default();
  REQUIRE(embedded.ok());
  CHECK(file->name == "quickstart");
  CHECK(embedded->mesh.nodes == file->mesh.nodes);
  CHECK(embedded->model.experts == file->model.experts);
  CHECK(file->mesh.heartbeat_ms == 100);
  CHECK(file->mesh.miss_limit == 3);
}

TEST_CASE("defaults fill what a job leaves out, and the name defaults to the file name") {
  auto r = load_text("return { mesh = { nodes = 2 } }", "jobs/tiny.lua", "jobs");
  REQUIRE(r.ok());
  CHECK(r->name == "tiny");
  CHECK(r->mesh.nodes == 2);
  CHECK(r->mesh.heartbeat_ms == 100);
  CHECK(r->policies.placement == "goodput");
  CHECK(r->policies.node_mtbf_h == 0);  // measured, else assumed
}

TEST_CASE("unknown keys are named with a suggestion") {
  std::string e = error_of("return { mesh = { heartbeatms = 100 } }");
  CHECK(e.find("x.lua: mesh.heartbeatms: unknown key (did you mean 'heartbeat_ms'?)") == 0);
  CHECK(error_of("return { mdoel = {} }").find("mdoel: unknown key (did you mean 'model'?)") != std::string::npos);
}

TEST_CASE("wrong types and impossible values say what was expected") {
  CHECK(error_of("return { mesh = { heartbeat_ms = 5 } }") ==
        "x.lua: mesh.heartbeat_ms: expected an integer in [10, 60000], got 5");
  CHECK(error_of("return { mesh = { nodes = 'four' } }").find("mesh.nodes: expected an integer") != std::string::npos);
  CHECK(error_of("return { train = { lr = 1.5e9 } }").find("train.lr: expected a number in [0, 10]") != std::string::npos);
  CHECK(error_of("return { data = { format = 'utf16' } }").find("expected one of bytes, uint16") != std::string::npos);
  CHECK(error_of("return { model = 3 }").find("model: expected a table of settings, got 3") != std::string::npos);
  CHECK(error_of("return { mesh = { heartbeat_ms = 100.5 } }").find("got 100.5") != std::string::npos);
}

TEST_CASE("metrics.bind: off by default, an endpoint or a bare port when set") {
  auto plain = load_text("return {}", "x.lua", ".");
  REQUIRE(plain.ok());
  CHECK(plain->metrics.bind.empty());
  for (const char* ok : {"tcp://127.0.0.1:9464", "tcp://127.0.0.1:*", "9464", "tcp://*:9464"}) {
    CAPTURE(ok);
    CHECK(load_text(std::string("return { metrics = { bind = '") + ok + "' } }", "x.lua", ".").ok());
  }
  CHECK(error_of("return { metrics = { bind = 'http://localhost:80' } }") ==
        "x.lua: metrics.bind: \"http://localhost:80\" is not an endpoint (expected tcp://HOST:PORT with PORT a "
        "number or * for any free port, or a bare PORT for loopback)");
  CHECK(error_of("return { metrics = { bind = 9464 } }").find("metrics.bind: expected a string, got 9464") !=
        std::string::npos);
  CHECK(error_of("return { metrics = { port = 9464 } }").find("metrics.port: unknown key") != std::string::npos);
}

TEST_CASE("rules that tie keys together") {
  CHECK(error_of("return { model = { d_model = 66, heads = 4 } }").find("model.heads: 4 does not divide") != std::string::npos);
  CHECK(error_of("return { model = { experts = 2, top_k = 3 } }").find("model.top_k") != std::string::npos);
  CHECK(error_of("return { mesh = { devices = 'gpu:1' } }").find("mesh.devices") != std::string::npos);
  CHECK(error_of("return { mesh = { bind = 'http://x' } }").find("mesh.bind") != std::string::npos);
  CHECK(error_of("return { security = { server_key = 'k' } }").find("go together") != std::string::npos);
  CHECK(error_of("return { policies = { placement = 'a b' } }").find("policies.placement") != std::string::npos);
}

TEST_CASE("the workers a local mesh starts must hold every expert once, or the first plan never comes") {
  auto small = load_text("return { model = { experts = 8 }, mesh = { nodes = 1, devices = 'cpu:3' }, policies = { slots = 2 } }",
                         "x.lua", ".");
  REQUIRE(small.ok());  // a controller's agents may be more than mesh.nodes: the job file itself is fine
  auto refused = check_first_plan(*small);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message() ==
        "3 worker(s) (1 nodes x mesh.devices = \"cpu:3\") x policies.slots = 2 cannot hold the 8 experts of a whole "
        "model once, so the first plan could never be made: start more nodes (--nodes, mesh.nodes) or raise "
        "policies.slots");
  small->mesh.nodes = 2;  // --nodes 2
  CHECK(check_first_plan(*small).ok());
}

TEST_CASE("the baselines take no sparse snapshots, whatever train.peer_copies says, and elastic takes its own") {
  for (const char* mode : {"fixed-ep-ft", "checkpoint-restart", "elastic"}) {
    CAPTURE(mode);
    const std::string text = std::string("return { train = { recovery = '") + mode + "', peer_copies = 3 } }";
    auto job = load_text(text, "x.lua", ".");
    REQUIRE(job.ok());
    CHECK(sparse_peer_copies(*job) == (std::string(mode) == "elastic" ? 3 : 0));
    CHECK(planner_config(*job).peer_copies == uint32_t(sparse_peer_copies(*job)));  // the planner is told the same
  }
}

TEST_CASE("parallel.groups and parallel.redundancy: refused before training with the rule broken") {
  auto ok = load_file(std::string(SAL_SOURCE_DIR) + "/scripts/jobs/groups8.lua");
  REQUIRE(ok.ok());
  CHECK(ok->parallel.groups == 4);
  CHECK(ok->parallel.redundancy == 2);
  CHECK(error_of("return { parallel = { groups = 3 }, mesh = { nodes = 8 } }") ==
        "x.lua: parallel.groups: 3 groups do not divide the 8 workers (mesh.nodes = 8 x mesh.devices = \"cpu:1\")");
  CHECK(error_of("return { parallel = { groups = 4 }, mesh = { nodes = 4 } }") ==
        "x.lua: parallel.groups: a group of 1 worker(s) x policies.slots = 4 cannot hold the 8 experts of a whole model once");
  CHECK(error_of("return { parallel = { groups = 4, redundancy = 3 }, mesh = { nodes = 8 }, "
                 "policies = { redundancy = 'spare' } }") ==
        "x.lua: parallel.redundancy: spare cannot stack r = 3 shard types over 4 groups: a cyclic Golomb ruler of r "
        "marks needs r(r-1) = 6 <= groups - 1 = 3");
  CHECK(error_of("return { parallel = { groups = 2, redundancy = 3 }, mesh = { nodes = 4 } }") ==
        "x.lua: parallel.redundancy: r = 3 is more than the 2 shard types (parallel.groups)");
  CHECK(error_of("return { parallel = { groups = 2 }, mesh = { nodes = 4 }, train = { recovery = 'fixed-ep-ft' } }")
            .find("groups recover the elastic way") != std::string::npos);
}

TEST_CASE("a file that does not return a table, errors, or loops is reported") {
  CHECK(error_of("return 5").find("must return a table") != std::string::npos);
  CHECK(error_of("error('nope')").find("nope") != std::string::npos);
  CHECK(error_of("while true do end").find("budget exceeded") != std::string::npos);
  CHECK(error_of("return { [1] = 2 }").find("is not a name") != std::string::npos);
  CHECK(error_of("return { mesh = undefined_thing }").find("unknown global 'undefined_thing'") != std::string::npos);
  CHECK(load_file("/nonexistent/job.lua").error().message().find("cannot open /nonexistent/job.lua") != std::string::npos);
}

TEST_CASE("the schema table lists every key with its rule and default") {
  std::string s = schema_table(true);
  CHECK(s.find("| `mesh.heartbeat_ms` | integer in [10, 60000] | `100` |") != std::string::npos);
  CHECK(s.find("`data.format` | one of bytes, uint16") != std::string::npos);
}

TEST_CASE("docs/job-file.md holds the current schema table") {
  std::ifstream in(std::string(SAL_SOURCE_DIR) + "/docs/job-file.md");
  std::string doc((std::istreambuf_iterator<char>(in)), {});
  CHECK(doc.find(schema_table(true)) != std::string::npos);
}

// ---- --set overrides (job/overrides.h) ----

namespace {

std::string write_job(const std::string& name, const std::string& text) {
  static const std::string dir = sal::test::temp_dir("overrides");
  std::string path = dir + "/" + name + ".lua";
  std::ofstream(path) << text;
  return path;
}

std::string override_error(const std::string& path, const Overrides& sets) {
  auto r = load_file(path, sets);
  REQUIRE_FALSE(r.ok());
  return r.error().message();
}

}  // namespace

TEST_CASE("--set overrides keys of the job file, and the job's text carries them") {
  auto path = write_job("ok", "-- a job\nreturn { mesh = { nodes = 2 }, train = { lr = 0.01 } }\n");
  auto r = load_file(path, {{"train.lr", "0.002"}, {"mesh.nodes", "3"}, {"policies.placement", "spread"},
                            {"name", "'tuned run'"}, {"model.d_model", "96"}});
  REQUIRE(r.ok());
  CHECK(r->train.lr == doctest::Approx(0.002));
  CHECK(r->mesh.nodes == 3);
  CHECK(r->policies.placement == "spread");
  CHECK(r->name == "tuned run");
  CHECK(r->model.d_model == 96);
  // the text the agents and workers get evaluates to the same job
  auto again = load_text(r->text, path, ".");
  REQUIRE(again.ok());
  CHECK(again->train.lr == doctest::Approx(0.002));
  CHECK(again->mesh.nodes == 3);
  // no overrides: the file's own values
  auto plain = load_file(path);
  REQUIRE(plain.ok());
  CHECK(plain->train.lr == doctest::Approx(0.01));
  CHECK(plain->mesh.nodes == 2);
}

TEST_CASE("--set mistakes get the schema's messages and name the override") {
  auto path = write_job("bad", "return { train = { lr = 0.01 } }\n");
  // a wrong key and a wrong value: the schema's own words
  CHECK(override_error(path, {{"train.lrr", "0.1"}}).find("train.lrr: unknown key (did you mean 'lr'?)") !=
        std::string::npos);
  CHECK(override_error(path, {{"train.lr", "fast"}}).find("train.lr: expected a number") != std::string::npos);
  // paths that are not key paths, and a path through a value
  CHECK(override_error(path, {{"train..lr", "1"}}).find("--set train..lr=1: 'train..lr' is not a key path") !=
        std::string::npos);
  CHECK(override_error(path, {{"train.lr.x", "1"}}).find("--set train.lr.x=1: train.lr is a number, not a table") !=
        std::string::npos);
}

TEST_CASE("--set keeps the job file's line numbers in its errors") {
  auto path = write_job("lines", "local a = 1\nlocal b = 2\nerror('line three')\nreturn {}\n");
  const std::string plain = override_error(path, {});
  const std::string with = override_error(path, {{"train.lr", "0.1"}});
  CHECK(plain.find(":3: line three") != std::string::npos);
  CHECK(with.find(":3: line three") != std::string::npos);
}

TEST_CASE("every error of a job file is reported at once, one line each naming the file") {
  const std::string e = error_of(
      "return { mesh = { heartbeatms = 100, nodes = 0 }, train = { lr = 'fast' }, mdoel = {} }");
  CHECK(e.find("x.lua: mesh.heartbeatms: unknown key") != std::string::npos);
  CHECK(e.find("x.lua: mesh.nodes: expected an integer") != std::string::npos);
  CHECK(e.find("x.lua: train.lr: expected a number") != std::string::npos);
  CHECK(e.find("x.lua: mdoel: unknown key") != std::string::npos);
  CHECK(std::count(e.begin(), e.end(), '\n') == 3);
  // rules between keys are judged once the keys themselves are valid, and all of them
  const std::string x = error_of("return { model = { heads = 6, d_model = 64, top_k = 9, experts = 8 } }");
  CHECK(x.find("x.lua: model.heads: 6 does not divide model.d_model = 64") != std::string::npos);
  CHECK(x.find("x.lua: model.top_k: 9 is more than model.experts = 8") != std::string::npos);
}

TEST_CASE("check_data says when a job's data.path does not exist") {
  auto r = load_text("return { data = { path = 'no-such-corpus' } }", "jobs/x.lua", "/tmp");
  REQUIRE(r.ok());
  auto s = check_data(*r);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message() == "jobs/x.lua: data.path: /tmp/no-such-corpus does not exist");
}

TEST_CASE("job file data.format uint32 and data.tokenizer: large vocabularies, the tokenizer resolved, each rule named") {
  auto big = load_text("return { model = { vocab = 100000 }, data = { path = 'ids.u32', format = 'uint32', "
                       "tokenizer = 'spm/ids.model' } }",
                       "jobs/x.lua", "/tmp");
  REQUIRE_MESSAGE(big.ok(), big.error().message());
  CHECK(big->model.vocab == 100000);
  CHECK(big->data.format == "uint32");
  CHECK(resolve_path(*big, big->data.tokenizer) == "/tmp/spm/ids.model");
  CHECK(load_text("return { model = { vocab = 65536 }, data = { path = 'ids', format = 'uint16' } }", "x.lua", ".").ok());
  CHECK(error_of("return { model = { vocab = 65537 }, data = { path = 'ids', format = 'uint16' } }") ==
        "x.lua: model.vocab: 65537 ids do not fit data.format = \"uint16\" (at most 65536): ids of a larger vocabulary "
        "are uint32");
  CHECK(error_of("return { data = { tokenizer = 't.model' } }") ==
        "x.lua: data.tokenizer: byte-level data (data.format = \"bytes\") has no tokenizer; it goes with token ids "
        "(data.format = \"uint16\" or \"uint32\")");
  CHECK(error_of("return { model = { vocab = 2000000 }, data = { format = 'uint32' } }")
            .find("model.vocab: expected an integer in [2, 1048576]") != std::string::npos);
  // the controller's and `job check`'s data check: the tokenizer must exist
  auto s = check_data(*big);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message() == "jobs/x.lua: data.path: /tmp/ids.u32 does not exist");
  auto here = load_text("return { model = { vocab = 300 }, data = { path = '.', format = 'uint16', tokenizer = 'none.model' } }",
                        "jobs/y.lua", SAL_SOURCE_DIR);
  REQUIRE(here.ok());
  CHECK(check_data(*here).error().message() ==
        "jobs/y.lua: data.tokenizer: " + std::string(SAL_SOURCE_DIR) + "/none.model does not exist");
  // a changed tokenizer is a difference a resumed run names
  auto other = load_text("return { model = { vocab = 100000 }, data = { path = 'ids.u32', format = 'uint32', "
                         "tokenizer = 'spm/other.model' } }",
                         "jobs/x.lua", "/tmp");
  REQUIRE(other.ok());
  auto changes = differences(*big, *other);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].key == "data.tokenizer");
  CHECK(changes[0].before == "/tmp/spm/ids.model");
}

TEST_CASE("mesh.racks: nodes by rack, and each mistake named with its part") {
  auto r = parse_racks("a: node0 node1; b: node2  node3 ;");
  REQUIRE(r.ok());
  CHECK(*r == std::map<std::string, std::string>{{"node0", "a"}, {"node1", "a"}, {"node2", "b"}, {"node3", "b"}});
  CHECK(parse_racks("")->empty());
  CHECK(parse_racks("a node0").error().message() ==
        "part 1 \"a node0\" is not RACK: NODE NODE ... (a rack name, a colon, node names)");
  CHECK(parse_racks("a: x; b c: y").error().message().find("part 2: \"b c\" is not a rack name") == 0);
  CHECK(parse_racks("a: x; a: y").error().message() == "rack \"a\" is named twice");
  CHECK(parse_racks("a: x; b: x").error().message() == "node \"x\" is in rack \"a\" and in rack \"b\"");
  CHECK(parse_racks("a: ").error().message() == "rack \"a\" names no node");
  // in a job file: the key and the rule
  CHECK(load_text("return { mesh = { racks = 'r1: node0 node1; r2: node2 node3' } }", "x.lua", ".").ok());
  CHECK(error_of("return { mesh = { racks = 'r1: node0; r2: node0' } }") ==
        "x.lua: mesh.racks: node \"node0\" is in rack \"r1\" and in rack \"r2\"");
}

TEST_CASE("train.log_copies: at most train.peer_copies where the workers log, named") {
  CHECK(load_text("return { train = { expert_logs = true, log_copies = 1 } }", "x.lua", ".").ok());
  CHECK(load_text("return { train = { expert_logs = true, log_copies = 2, peer_copies = 2 } }", "x.lua", ".").ok());
  CHECK(load_text("return { train = { log_copies = 5 } }", "x.lua", ".").ok());  // no logs: nothing to copy
  CHECK(error_of("return { train = { expert_logs = true, log_copies = 3 } }") ==
        "x.lua: train.log_copies: 3 is above train.peer_copies = 2: the upstream logs go to the slice peers");
}

TEST_CASE("train.eval_every: needs a validation split and CPU workers, each rule named") {
  CHECK(load_text("return { data = { validation = 0.05 }, train = { eval_every = 10 } }", "x.lua", ".").ok());
  CHECK(error_of("return { train = { eval_every = 10 } }") ==
        "x.lua: train.eval_every: 10 needs a validation split: set data.validation (the fraction of the corpus held "
        "out, e.g. 0.05)");
  CHECK(error_of("return { data = { validation = 0.05 }, train = { eval_every = 10 }, mesh = { devices = 'cuda:0' } }")
            .find("train.eval_every: validation runs on CPU workers only") != std::string::npos);
  CHECK(error_of("return { data = { validation = 0.6 } }").find("data.validation: expected a number in [0, 0.5]") !=
        std::string::npos);
}

TEST_CASE("model.bias_update: moe-llama's, in [0, 1], each rule named") {
  auto ok = load_text("return { model = { kind = 'moe-llama', bias_update = 0.001, aux_loss_weight = 0 } }", "x.lua", ".");
  REQUIRE(ok.ok());
  CHECK(model_dims(ok->model).router_bias);
  CHECK(error_of("return { model = { bias_update = 0.001 } }") ==
        "x.lua: model.bias_update: a moe-llama key; model.kind is \"moe-gpt\"");
  CHECK(error_of("return { model = { kind = 'moe-llama', bias_update = 2 } }").find("model.bias_update: expected a number in [0, 1]") !=
        std::string::npos);
}

TEST_CASE("moe-llama on GPU workers: accepted, but not its routing bias or a top-k above 8, each rule named") {
  auto shipped = load_file(std::string(SAL_SOURCE_DIR) + "/scripts/jobs/gpu_llama.lua");
  REQUIRE_MESSAGE(shipped.ok(), (shipped.ok() ? "" : shipped.error().message()));
  CHECK(shipped->model.kind == "moe-llama");
  CHECK(shipped->mesh.devices == "cuda:0");
  CHECK(load_text("return { model = { kind = 'moe-llama', kv_heads = 2, qk_norm = true, shared_experts = 1 }, "
                  "mesh = { devices = 'cuda:0' } }",
                  "x.lua", ".")
            .ok());
  CHECK(error_of("return { model = { kind = 'moe-llama', bias_update = 0.001 }, mesh = { devices = 'cuda:0' } }") ==
        "x.lua: model.bias_update: DeepSeek-V3's routing bias runs on CPU workers only for now (mesh.devices = "
        "\"cuda:0\")");
  CHECK(error_of("return { model = { kind = 'moe-llama', experts = 16, top_k = 9 }, mesh = { devices = 'cuda:0' } }") ==
        "x.lua: model.top_k: GPU workers route a token to at most 8 experts, and top_k = 9 (mesh.devices = "
        "\"cuda:0\")");
  CHECK(load_text("return { model = { kind = 'moe-llama', experts = 16, top_k = 9 } }", "x.lua", ".").ok());
}

TEST_CASE("model.shared_gate: moe-llama's, and only over shared experts") {
  CHECK(load_text("return { model = { kind = 'moe-llama', shared_experts = 2, shared_gate = true, attn_bias = true } }",
                  "x.lua", ".")
            .ok());
  CHECK(error_of("return { model = { kind = 'moe-llama', shared_gate = true } }") ==
        "x.lua: model.shared_gate: gates the shared experts, and model.shared_experts is 0");
  CHECK(error_of("return { model = { attn_bias = true } }") ==
        "x.lua: model.attn_bias: a moe-llama key; model.kind is \"moe-gpt\"");
}
