// test_export.cpp — the safetensors export (engine/ckpt/export.h) read back without our writer: a
// checkpoint written in the SALUNIT2 format, exported, then parsed here by hand (the 8-byte length,
// nlohmann-json on the header) and checked against the unit files' own bytes — every name and shape
// as docs/checkpoints.md lists them, offsets covering the data exactly, the metadata. Plus the
// errors (not a checkpoint, incomplete, damaged), how a run directory resolves to its checkpoint,
// and the manifest's tokens line.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/export.h"
#include "ckpt/format.h"
#include "ckpt/safetensors.h"
#include "model/params.h"

using namespace sal;
using nlohmann::json;

namespace {

constexpr size_t kUnitHeader = 36;  // SALUNIT2's header: magic, kind, layer, expert, length, step

std::string fresh_dir(const std::string& tag) {
  std::string dir = std::filesystem::temp_directory_path().string() + "/sal-export-" + tag + "-" +
                    std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small model whose every size differs (V=11, T=5, d=8, E=3), so a swapped shape shows.
model::Dims small_dims() {
  model::Dims d;
  d.layers = 2, d.d = 8, d.heads = 2, d.experts = 3, d.top_k = 2, d.seq_len = 5, d.vocab = 11;
  return d;
}

// Writes a whole checkpoint of step `step`: every unit (weights and two distinct moments), then
// the manifest. Returns the number of units.
size_t write_checkpoint(const std::string& dir, const model::Dims& d, uint64_t step) {
  std::filesystem::create_directories(dir);
  auto p = model::Params::create(d, 5, model::Params::all_experts(d));
  for (model::Unit* u : p.units()) {
    for (size_t i = 0; i < u->w.size(); ++i) {
      u->m[i] = 0.001f * float(i) + 1.0f;
      u->v[i] = 0.002f * float(i) + 2.0f;
    }
    REQUIRE(ckpt::write_unit(dir, *u, step).ok());
  }
  REQUIRE(ckpt::write_manifest(dir, step, p.units().size(), d, "uint16").ok());
  return p.units().size();
}

// What docs/checkpoints.md promises: each name, its shape, and where its floats sit (unit file,
// offset in floats within the unit's weights).
struct Expected {
  std::vector<int64_t> shape;
  std::string unit;  // file name in the checkpoint
  size_t offset = 0;
  size_t unit_floats = 0;
};

std::map<std::string, Expected> expected_tensors(const model::Dims& d) {
  std::map<std::string, Expected> out;
  const int64_t V = d.vocab, T = d.seq_len, D = d.d, E = d.experts, F = 4 * d.d;
  auto e = embedding_layout(d);
  size_t en = e.total;
  out["embed.tokens"] = {{V, D}, "embedding.bin", e.tok.offset, en};
  out["embed.positions"] = {{T, D}, "embedding.bin", e.pos.offset, en};
  out["final_norm.weight"] = {{D}, "embedding.bin", e.lnf_g.offset, en};
  out["final_norm.bias"] = {{D}, "embedding.bin", e.lnf_b.offset, en};
  auto dl = dense_layout(d);
  auto xl = expert_layout(d);
  for (int l = 0; l < d.layers; ++l) {
    std::string at = "layers." + std::to_string(l) + ".", unit = "layer" + std::to_string(l);
    std::string dense = unit + ".dense.bin";
    out[at + "ln1.weight"] = {{D}, dense, dl.ln1_g.offset, dl.total};
    out[at + "ln1.bias"] = {{D}, dense, dl.ln1_b.offset, dl.total};
    out[at + "attn.w_qkv"] = {{D, 3 * D}, dense, dl.w_qkv.offset, dl.total};
    out[at + "attn.b_qkv"] = {{3 * D}, dense, dl.b_qkv.offset, dl.total};
    out[at + "attn.w_o"] = {{D, D}, dense, dl.w_o.offset, dl.total};
    out[at + "attn.b_o"] = {{D}, dense, dl.b_o.offset, dl.total};
    out[at + "ln2.weight"] = {{D}, dense, dl.ln2_g.offset, dl.total};
    out[at + "ln2.bias"] = {{D}, dense, dl.ln2_b.offset, dl.total};
    out[at + "gate.w"] = {{D, E}, unit + ".gate.bin", 0, size_t(D * E)};
    for (int x = 0; x < d.experts; ++x) {
      std::string ex = at + "experts." + std::to_string(x) + ".", file = unit + ".expert" + std::to_string(x) + ".bin";
      out[ex + "w1"] = {{D, F}, file, xl.w1.offset, xl.total};
      out[ex + "b1"] = {{F}, file, xl.b1.offset, xl.total};
      out[ex + "w2"] = {{F, D}, file, xl.w2.offset, xl.total};
      out[ex + "b2"] = {{D}, file, xl.b2.offset, xl.total};
    }
  }
  return out;
}

// A safetensors file parsed by hand.
struct Parsed {
  json header;
  size_t header_len = 0;
  std::string data;  // everything after the header
};

Parsed parse_file(const std::string& path) {
  std::string file = bytes_of(path);
  REQUIRE(file.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(file[size_t(i)]);
  REQUIRE(8 + n <= file.size());
  Parsed p;
  p.header_len = n;
  std::string text = file.substr(8, n);
  CHECK(text.front() == '{');
  CHECK(text.find_last_not_of(' ') == text.rfind('}'));  // padded with spaces only
  p.header = json::parse(text);
  p.data = file.substr(8 + n);
  return p;
}

// Every tensor's byte range, sorted: they must tile [0, data size) with no gap and no overlap.
void check_tiling(const Parsed& p) {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto& [name, t] : p.header.items()) {
    if (name == "__metadata__") continue;
    CAPTURE(name);
    CHECK(t["dtype"] == "F32");
    size_t count = 1;
    for (auto dim : t["shape"]) count *= dim.get<size_t>();
    auto off = t["data_offsets"];
    REQUIRE(off.size() == 2);
    CHECK(off[1].get<size_t>() - off[0].get<size_t>() == count * 4);
    ranges.emplace_back(off[0].get<size_t>(), off[1].get<size_t>());
  }
  std::sort(ranges.begin(), ranges.end());
  size_t at = 0;
  for (auto [b, e] : ranges) {
    CHECK(b == at);
    at = e;
  }
  CHECK(at == p.data.size());
}

// The tensor's bytes in the file against the unit file's: moment 0 the weights, 1 and 2 AdamW's.
void check_bytes(const Parsed& p, const std::string& dir, const std::string& name, const Expected& want, int moment) {
  CAPTURE(name);
  auto t = p.header[name];
  size_t b = t["data_offsets"][0], e = t["data_offsets"][1];
  std::string unit = bytes_of(dir + "/" + want.unit);
  size_t from = kUnitHeader + (size_t(moment) * want.unit_floats + want.offset) * 4;
  CHECK(p.data.compare(b, e - b, unit, from, e - b) == 0);
}

// A checkpoint of step `step` written to <dir>/ckpt, exported to <dir>/model.safetensors, parsed,
// its offsets checked.
std::pair<ckpt::ExportSummary, Parsed> export_checkpoint(const std::string& dir, const model::Dims& d, uint64_t step,
                                                         bool optimizer) {
  write_checkpoint(dir + "/ckpt", d, step);
  auto done = ckpt::export_safetensors(dir + "/ckpt", dir + "/model.safetensors", optimizer);
  REQUIRE_MESSAGE(done.ok(), done.error().message());
  auto p = parse_file(dir + "/model.safetensors");
  check_tiling(p);
  return {*done, p};
}

}  // namespace

TEST_CASE("export-safetensors: every tensor named and shaped as documented, its bytes the checkpoint's, "
          "the offsets covering the file") {
  const std::string dir = fresh_dir("whole");
  const auto d = small_dims();
  auto [done, p] = export_checkpoint(dir, d, 7, false);
  CHECK((8 + p.header_len) % 8 == 0);  // the data starts aligned
  CHECK(done.bytes == 8 + p.header_len + p.data.size());
  auto want = expected_tensors(d);
  CHECK(p.header.size() == want.size() + 1);  // + __metadata__
  CHECK(done.tensors == want.size());
  for (auto& [name, w] : want) {
    CAPTURE(name);
    REQUIRE(p.header.contains(name));
    CHECK(p.header[name]["shape"].get<std::vector<int64_t>>() == w.shape);
    check_bytes(p, dir + "/ckpt", name, w, 0);
  }
  auto meta = p.header["__metadata__"];
  for (auto& [key, v] : meta.items()) CHECK_MESSAGE(v.is_string(), key);  // a map of strings
  const std::map<std::string, std::string> config{
      {"step", "7"},   {"layers", "2"}, {"d_model", "8"}, {"heads", "2"},   {"experts", "3"},
      {"top_k", "2"},  {"ffn", "32"},   {"seq_len", "5"}, {"vocab", "11"},  {"tokens", "uint16"},
      {"lm_head", "embed.tokens"},      {"matrix_layout", "in_out"}};
  for (const auto& [key, value] : config) {
    CAPTURE(key);
    CHECK(meta[key] == value);
  }
  CHECK_FALSE(meta.contains("optimizer"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("export-safetensors-optimizer: --optimizer adds both AdamW moments of every tensor") {
  const std::string dir = fresh_dir("optim");
  const auto d = small_dims();
  auto [done, p] = export_checkpoint(dir, d, 3, true);
  auto want = expected_tensors(d);
  CHECK(done.tensors == 3 * want.size());
  for (auto& [name, w] : want) {
    check_bytes(p, dir + "/ckpt", name, w, 0);
    check_bytes(p, dir + "/ckpt", "optim.exp_avg." + name, w, 1);
    check_bytes(p, dir + "/ckpt", "optim.exp_avg_sq." + name, w, 2);
  }
  CHECK(p.header["__metadata__"]["optimizer"] == "adamw");
  CHECK(p.header["__metadata__"]["adamw_beta2"] == "0.95");
  std::filesystem::remove_all(dir);
}

TEST_CASE("export-errors: not a checkpoint, an incomplete one and a damaged one are refused, naming the file") {
  const std::string dir = fresh_dir("errors");
  const auto d = small_dims();
  auto out = dir + "/x.safetensors";
  auto none = ckpt::export_safetensors(dir + "/missing", out, false);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message() == dir + "/missing: no such directory");
  std::filesystem::create_directories(dir + "/empty");
  auto empty = ckpt::export_safetensors(dir + "/empty", out, false);
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message().find(dir + "/empty has no manifest: not a complete checkpoint") == 0);
  write_checkpoint(dir + "/ckpt", d, 4);
  std::filesystem::remove(dir + "/ckpt/layer1.expert2.bin");
  auto partial = ckpt::export_safetensors(dir + "/ckpt", out, false);
  REQUIRE_FALSE(partial.ok());
  CHECK(partial.error().message().find(dir + "/ckpt: an incomplete or damaged checkpoint: cannot open " + dir +
                                       "/ckpt/layer1.expert2.bin") == 0);
  write_checkpoint(dir + "/ckpt2", d, 4);
  std::filesystem::resize_file(dir + "/ckpt2/layer0.gate.bin", 50);
  auto damaged = ckpt::export_safetensors(dir + "/ckpt2", out, false);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.error().message().find("layer0.gate.bin: truncated") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out));  // nothing half written
  // one bit flipped on disk, the file's length intact: its digest finds it
  write_checkpoint(dir + "/ckpt3", d, 4);
  {
    std::fstream f(dir + "/ckpt3/layer1.expert2.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x10);
    f.seekp(100);
    f.write(&c, 1);
  }
  auto flipped = ckpt::export_safetensors(dir + "/ckpt3", out, false);
  REQUIRE_FALSE(flipped.ok());
  CHECK_MESSAGE(flipped.error().message().find("layer1.expert2.bin: damaged: its values do not match the digest") !=
                    std::string::npos,
                flipped.error().message());
  CHECK_FALSE(std::filesystem::exists(out));
  std::filesystem::remove_all(dir);
}

TEST_CASE("unit-file-v1: a unit file written before the digest (SALUNIT1) is still read, the same values") {
  const std::string dir = fresh_dir("v1");
  const auto d = small_dims();
  write_checkpoint(dir, d, 4);
  const std::string path = dir + "/layer0.expert1.bin";
  uint64_t step = 0;
  auto v2 = ckpt::read_unit(path, d, &step);
  REQUIRE(v2.ok());
  std::stringstream read;
  read << std::ifstream(path, std::ios::binary).rdbuf();
  std::string bytes = read.str();
  bytes[7] = '1';                  // the old magic
  bytes.resize(bytes.size() - 8);  // and no digest
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto v1 = ckpt::read_unit(path, d, &step);
  REQUIRE_MESSAGE(v1.ok(), v1.error().message());
  CHECK(step == 4);
  CHECK(v1->w == v2->w);
  CHECK(v1->v == v2->v);
  bytes[7] = '2';  // a digested magic without its digest is short
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  auto short_one = ckpt::read_unit(path, d, &step);
  REQUIRE_FALSE(short_one.ok());
  CHECK(short_one.error().message() == path + ": truncated");
  std::filesystem::remove_all(dir);
}

TEST_CASE("resolve-checkpoint: a run directory gives its final checkpoint, else its newest complete snapshot") {
  const std::string dir = fresh_dir("resolve");
  const auto d = small_dims();
  write_checkpoint(dir + "/run/snapshots/step-3", d, 3);
  write_checkpoint(dir + "/run/snapshots/step-6", d, 6);
  std::filesystem::create_directories(dir + "/run/snapshots/step-9");  // begun, never completed
  CHECK(*ckpt::resolve_checkpoint(dir + "/run") == dir + "/run/snapshots/step-6");
  write_checkpoint(dir + "/run/checkpoint", d, 8);
  CHECK(*ckpt::resolve_checkpoint(dir + "/run") == dir + "/run/checkpoint");
  CHECK(*ckpt::resolve_checkpoint(dir + "/run/snapshots/step-3") == dir + "/run/snapshots/step-3");
  auto incomplete = ckpt::resolve_checkpoint(dir + "/run/snapshots/step-9");
  REQUIRE_FALSE(incomplete.ok());
  CHECK(incomplete.error().message().find("has no manifest: not a complete checkpoint") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("manifest-tokens: the token format is recorded, read back, and a wrong one refused naming the line") {
  const std::string dir = fresh_dir("tokens");
  const auto d = small_dims();
  REQUIRE(ckpt::write_manifest(dir, 2, 9, d, "bytes").ok());
  CHECK(ckpt::read_manifest(dir)->tokens == "bytes");
  REQUIRE(ckpt::write_manifest(dir, 2, 9, d).ok());
  CHECK(ckpt::read_manifest(dir)->tokens.empty());
  std::ofstream(dir + "/manifest", std::ios::app) << "tokens words\n";
  auto bad = ckpt::read_manifest(dir);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == dir + "/manifest:10: tokens: expected bytes, uint16 or uint32, got 'words'");
  std::filesystem::remove_all(dir);
}

TEST_CASE("safetensors-encode: a duplicate, empty or reserved name is refused") {
  float x[2] = {1, 2};
  CHECK(ckpt::encode_safetensors({{"a", {2}, x}, {"a", {1}, x}}, {}).error().message() == "a: two tensors of that name");
  CHECK_FALSE(ckpt::encode_safetensors({{"__metadata__", {2}, x}}, {}).ok());
  CHECK_FALSE(ckpt::encode_safetensors({{"", {2}, x}}, {}).ok());
  auto ok = ckpt::encode_safetensors({{"a", {2}, x}}, {});
  REQUIRE(ok.ok());
  CHECK(ok->size() % 8 == 0);  // header padded to 8, then 8 data bytes
}
