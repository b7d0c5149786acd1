// t0311_export.cpp — `salamander export` as a user meets it: the run directory of a real run gives
// a safetensors file whose metadata names the step and the token format the controller recorded;
// an unknown format is a usage error (2), something that is not a checkpoint a failure (1) that says
// why, and `sample --logits` refuses ragged sequences. (The tensors themselves: tests/ckpt.)
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/mesh_harness.h"
#include "support/run_files.h"

using namespace sal;
using namespace sal::test;

namespace {

// The JSON header of a safetensors file.
nlohmann::json safetensors_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8] = {};
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  std::string text(n, '\0');
  in.read(text.data(), std::streamsize(n));
  return nlohmann::json::parse(text);
}

}  // namespace

TEST_CASE("t0311-export: a run directory exports as safetensors (the default format), and a wrong format or a non-checkpoint is refused") {
  const std::string dir = temp_dir("export");
  Proc train = spawn({bin(), "run", tiny_job(dir, "tiny"), "--steps", "12", "--nodes", "2", "--out", dir + "/run"},
                     dir + "/run.out");
  REQUIRE(train.wait(30000) == 0);
  const std::string file = dir + "/model.safetensors";
  // --format defaults to safetensors, the one format
  Proc ok = spawn({bin(), "export", "--checkpoint", dir + "/run", "--out", file}, dir + "/export.out");
  REQUIRE(ok.wait(20000) == 0);
  CHECK(ok.output().find("wrote " + file + ": ") == 0);
  CHECK(ok.output().find("from " + dir + "/run/checkpoint") != std::string::npos);
  auto header = safetensors_header(file);
  CHECK(header["__metadata__"]["step"] == "12");
  CHECK(header["__metadata__"]["tokens"] == "bytes");  // the manifest's tokens line, from the job
  CHECK(header["layers.0.experts.3.w2"]["shape"] == nlohmann::json::array({64, 16}));  // the tiny model: d 16

  Proc format = spawn({bin(), "export", "--checkpoint", dir + "/run", "--format", "onnx"}, dir + "/format.out");
  CHECK(format.wait(20000) == 2);
  CHECK(format.output().find("--format: 'onnx' is not an export format (safetensors)") != std::string::npos);
  std::filesystem::create_directories(dir + "/empty");
  Proc empty = spawn({bin(), "export", "--checkpoint", dir + "/empty", "--format", "safetensors", "--out", file},
                     dir + "/empty.out");
  CHECK(empty.wait(20000) == 1);
  CHECK(empty.output().find(dir + "/empty has no manifest: not a complete checkpoint") != std::string::npos);
  Proc ragged = spawn({bin(), "sample", "--checkpoint", dir + "/run", "--logits", "1,2;3"}, dir + "/ragged.out");
  CHECK(ragged.wait(20000) == 1);
  CHECK(ragged.output().find("every sequence needs the same length (2 tokens), got 1") != std::string::npos);
}
