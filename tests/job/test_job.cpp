// test_job.cpp — job files: the shipped quickstart is valid, and every kind of mistake is rejected
// with the file, the key and the rule.
#include <doctest/doctest.h>

#include <fstream>

#include "job/config.h"

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
  CHECK(r->policies.placement == "mro");
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

TEST_CASE("rules that tie keys together") {
  CHECK(error_of("return { model = { d_model = 66, heads = 4 } }").find("model.heads: 4 does not divide") != std::string::npos);
  CHECK(error_of("return { model = { experts = 2, top_k = 3 } }").find("model.top_k") != std::string::npos);
  CHECK(error_of("return { mesh = { devices = 'gpu:1' } }").find("mesh.devices") != std::string::npos);
  CHECK(error_of("return { mesh = { bind = 'http://x' } }").find("mesh.bind") != std::string::npos);
  CHECK(error_of("return { security = { server_key = 'k' } }").find("go together") != std::string::npos);
  CHECK(error_of("return { policies = { placement = 'a b' } }").find("policies.placement") != std::string::npos);
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
