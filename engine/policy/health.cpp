// health.cpp — the health kind: what to do about a slow worker (issue 37's fifth slot).
//   ctx      = { step, window, slow_ratio, back_ratio, min_workers,
//                workers = { { name, node, ratio, lag, slow, steps, since_step, share, corrupt }, ... } }
//   proposal = { shares = { share per worker }, drain = { worker positions }, note = "..." }
// Workers are the plan's ranks in rank order, 1-based in Lua. A share is a worker's part of the
// step's work relative to an even part (1: even; 0.5: half of one): the driver turns the shares
// into how many sequences of the batch each rank computes and how many of an expert's tokens each
// replica takes. A drained worker's node leaves the job (the job re-plans without it). The floor
// policy is `ignore`'s: every share 1, nothing drained — lockstep, as before this slot existed.
#include <lua.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

#include "policy/kinds.h"
#include "policy/lua_io.h"
#include "plan/validate.h"

namespace sal::policy {
namespace {

using lua_io::set_number;
using lua_io::set_string;

// The least share a worker may be given: below it a worker is better drained.
constexpr double kMinShare = 0.05;
constexpr size_t kNoteChars = 400;

std::string number_text(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

void push_worker(lua_State* L, const WorkerHealthInfo& w) {
  lua_newtable(L);
  set_string(L, "name", w.name);
  set_number(L, "node", w.node);
  set_number(L, "ratio", w.ratio);
  set_number(L, "lag", w.lag);
  lua_pushboolean(L, w.slow);
  lua_setfield(L, -2, "slow");
  set_number(L, "steps", double(w.steps));
  set_number(L, "since_step", double(w.since_step));
  set_number(L, "share", w.share);
  set_number(L, "corrupt", double(w.corrupt));
}

void push_ctx(lua_State* L, const Input& input) {
  const auto& in = std::get<HealthInput>(input);
  lua_newtable(L);
  set_number(L, "step", double(in.step));
  set_number(L, "window", in.window);
  set_number(L, "slow_ratio", in.slow_ratio);
  set_number(L, "back_ratio", in.back_ratio);
  set_number(L, "min_workers", in.min_workers);
  lua_createtable(L, int(in.workers.size()), 0);
  for (size_t i = 0; i < in.workers.size(); ++i) {
    push_worker(L, in.workers[i]);
    lua_rawseti(L, -2, int(i + 1));
  }
  lua_setfield(L, -2, "workers");
}

Result<WorkerHealthInfo> read_worker(lua_State* L, int idx, const std::string& path) {
  if (lua_type(L, idx) != LUA_TTABLE) return fail(path, ": expected a table");
  SAL_TRY(lua_io::plain_table(L, idx, path));
  WorkerHealthInfo w;
  w.name = lua_io::read_field_string(L, idx, "name", "", 64);
  auto node = lua_io::read_field_number(L, idx, "node", path, 0);
  auto ratio = lua_io::read_field_number(L, idx, "ratio", path, 1);
  auto lag = lua_io::read_field_number(L, idx, "lag", path, 1);
  auto steps = lua_io::read_field_number(L, idx, "steps", path, 0);
  auto since = lua_io::read_field_number(L, idx, "since_step", path, 0);
  auto share = lua_io::read_field_number(L, idx, "share", path, 1);
  auto corrupt = lua_io::read_field_number(L, idx, "corrupt", path, 0);
  for (const auto* r : {&node, &ratio, &lag, &steps, &since, &share, &corrupt})
    if (!*r) return r->error();
  int slow = lua_io::field(L, idx, "slow");
  w.slow = lua_toboolean(L, slow);
  lua_pop(L, 1);
  w.node = uint32_t(*node), w.ratio = *ratio, w.lag = *lag, w.steps = uint64_t(*steps), w.since_step = uint64_t(*since);
  w.share = *share;
  w.corrupt = uint64_t(*corrupt);
  return w;
}

Result<Input> read_ctx(lua_State* L, int idx, lua::Meter& m) {
  if (lua_type(L, idx) != LUA_TTABLE) return fail("ctx must be a table");
  HealthInput in;
  auto step = lua_io::read_field_number(L, idx, "step", "ctx", 0);
  auto window = lua_io::read_field_number(L, idx, "window", "ctx", in.window);
  auto slow = lua_io::read_field_number(L, idx, "slow_ratio", "ctx", in.slow_ratio);
  auto back = lua_io::read_field_number(L, idx, "back_ratio", "ctx", in.back_ratio);
  auto least = lua_io::read_field_number(L, idx, "min_workers", "ctx", in.min_workers);
  for (const auto* r : {&step, &window, &slow, &back, &least})
    if (!*r) return r->error();
  in.step = uint64_t(*step), in.window = uint32_t(*window), in.slow_ratio = *slow, in.back_ratio = *back;
  in.min_workers = uint32_t(*least);
  int ws = lua_io::field(L, idx, "workers");
  const int n = lua_io::sequence_length(L, ws);
  Status ok;
  if (n < 0) ok = fail("ctx.workers: expected a list of workers");
  for (int i = 1; ok && i <= n; ++i) {
    lua_rawgeti(L, ws, i);
    auto w = read_worker(L, lua_gettop(L), "ctx.workers[" + std::to_string(i) + "]");
    lua_pop(L, 1);
    if (auto s = m.value(); !s) ok = s;
    else if (!w) ok = w.error();
    else in.workers.push_back(std::move(*w));
  }
  lua_pop(L, 1);
  if (!ok) return ok.error();
  return Input(std::move(in));
}

Result<Proposal> read(lua_State* L, int idx, const Input& input, lua::Meter& m) {
  const auto& in = std::get<HealthInput>(input);
  if (lua_type(L, idx) != LUA_TTABLE) return fail("the proposal must be a table { shares, drain, note }");
  SAL_TRY(lua_io::only_keys(L, idx, {"shares", "drain", "note"}, "health proposal"));
  HealthProposal p;
  int f = lua_io::field(L, idx, "shares");
  auto shares = lua_isnil(L, f) ? Result<std::vector<double>>(std::vector<double>(in.workers.size(), 1.0))
                                : lua_io::read_numbers(L, m, f, "shares");
  lua_pop(L, 1);
  if (!shares) return shares.error();
  p.shares = std::move(*shares);
  const uint32_t workers = uint32_t(std::max<size_t>(in.workers.size(), 1));
  int d = lua_io::field(L, idx, "drain");
  auto drain = lua_isnil(L, d) ? Result<std::vector<uint32_t>>(std::vector<uint32_t>{})
                               : lua_io::read_uints(L, m, d, "drain", 1, workers, plan::kLuaIds);
  lua_pop(L, 1);
  if (!drain) return drain.error();
  p.drain = std::move(*drain);
  p.note = lua_io::read_field_string(L, idx, "note", "", kNoteChars);
  return Proposal(std::move(p));
}

// The nodes left once the drained workers' nodes leave.
size_t workers_left(const HealthProposal& p, const HealthInput& in) {
  std::set<uint32_t> gone;
  for (uint32_t w : p.drain) gone.insert(in.workers[w].node);
  return size_t(std::count_if(in.workers.begin(), in.workers.end(), [&](const auto& w) { return !gone.count(w.node); }));
}

Status validate(const Proposal& proposal, const Input& input) {
  const auto& p = std::get<HealthProposal>(proposal);
  const auto& in = std::get<HealthInput>(input);
  if (p.shares.size() != in.workers.size())
    return fail("shares has ", p.shares.size(), " entries for ", in.workers.size(), " workers");
  for (size_t i = 0; i < p.shares.size(); ++i)
    if (!(p.shares[i] >= kMinShare && p.shares[i] <= 1))
      return fail("shares[", i + plan::kLuaIds, "] is ", number_text(p.shares[i]), ": a share lies in [",
                  number_text(kMinShare), ", 1] (drain a worker that should get less)");
  std::set<uint32_t> seen;
  for (uint32_t w : p.drain) {
    if (w >= in.workers.size()) return fail("drain names worker ", w + plan::kLuaIds, " of ", in.workers.size());
    if (!seen.insert(w).second) return fail("drain names worker ", w + plan::kLuaIds, " twice");
  }
  if (!p.drain.empty() && workers_left(p, in) < in.min_workers)
    return fail("draining would leave ", workers_left(p, in), " workers; the job needs at least ", in.min_workers);
  return {};
}

Proposal floor_policy(const Input& input) {
  const auto& in = std::get<HealthInput>(input);
  HealthProposal p;
  p.shares.assign(in.workers.size(), 1.0);
  p.note = "lockstep: every worker an even share";
  return p;
}

std::string share_text(double s) {
  char b[16];
  std::snprintf(b, sizeof b, "%.2f", s);
  return b;
}

std::string summary(const Proposal& proposal) {
  const auto& p = std::get<HealthProposal>(proposal);
  std::string less;
  for (size_t i = 0; i < p.shares.size(); ++i)
    if (p.shares[i] < 1) less += (less.empty() ? "" : ", ") + ("worker " + std::to_string(i + plan::kLuaIds) + " " + share_text(p.shares[i]));
  std::string out = less.empty() ? "even shares" : "less work: " + less;
  if (!p.drain.empty()) out += "; drain " + std::to_string(p.drain.size()) + " worker(s)";
  return out;
}

std::string diff(const Proposal& before, const Proposal& after) {
  const auto& a = std::get<HealthProposal>(before);
  const auto& b = std::get<HealthProposal>(after);
  size_t changed = 0;
  for (size_t i = 0; i < std::min(a.shares.size(), b.shares.size()); ++i) changed += a.shares[i] != b.shares[i];
  if (changed == 0 && a.shares.size() == b.shares.size() && a.drain == b.drain) return "same shares";
  return std::to_string(changed) + " shares change" + (a.drain != b.drain ? ", what is drained changes" : "");
}

nlohmann::ordered_json to_json(const Proposal& proposal) {
  const auto& p = std::get<HealthProposal>(proposal);
  nlohmann::ordered_json j;
  j["shares"] = p.shares;
  std::vector<uint32_t> drain;
  for (uint32_t w : p.drain) drain.push_back(w + plan::kLuaIds);
  j["drain"] = drain;
  j["note"] = p.note;
  return j;
}

}  // namespace

const KindOps& health_ops() {
  static const KindOps ops{push_ctx, read_ctx, read, validate, floor_policy, summary, diff, to_json};
  return ops;
}

}  // namespace sal::policy
