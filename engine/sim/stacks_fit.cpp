// stacks_fit.cpp — see stacks_fit.h.
#include "sim/stacks_fit.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "core/strings.h"
#include "policy/algo/spare.h"
#include "report/run_files.h"

namespace sal::sim {
namespace {

// "step 10 ..." -> 10.
std::optional<uint64_t> step_of(const std::string& detail) {
  if (detail.rfind("step ", 0) != 0) return std::nullopt;
  try {
    return std::stoull(detail.substr(5));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The groups of "lost 3.0, 5.0 (group 1, 2)" in an event's detail.
std::vector<uint32_t> groups_of(const std::string& detail) {
  std::vector<uint32_t> out;
  auto at = detail.find("(group ");
  if (at == std::string::npos) return out;
  auto end = detail.find(')', at);
  for (const auto& g : split(detail.substr(at + 7, end - at - 7), ','))
    if (auto t = trim(g); !t.empty()) out.push_back(uint32_t(std::stoul(std::string(t))));
  return out;
}

// SPARe's model on a plan's stacks with `up` groups in the step: the minimal depth, 0 when wiped out.
Result<uint32_t> model_depth(const report::PlanRecord& p, const std::vector<bool>& up) {
  algo::ShardStacks s;
  s.shard_types = int(p.hosts.size());
  for (const auto& h : p.hosts) s.stacks.emplace_back(h.begin(), h.end());
  s.alive = up;
  if (std::none_of(up.begin(), up.end(), [](bool b) { return b; })) return 0u;
  auto r = algo::reorder(s);
  if (!r) return r.error();
  return r->outcome == algo::ReorderOutcome::wiped_out ? 0u : uint32_t(r->depth);
}

std::vector<bool> groups_up(const report::PlanRecord& p) {
  std::vector<bool> up;
  for (uint32_t n : p.groups) up.push_back(n > 0);
  return up;
}

// The plan in force at `time_s` (the run's clock): the last one put in force before it. (By step it
// would be ambiguous: the plan made after an aborted step starts at that very step.)
const report::PlanRecord* plan_at(const std::vector<report::PlanRecord>& plans, double time_s) {
  const report::PlanRecord* at = nullptr;
  for (const auto& p : plans)
    if (p.time_s <= time_s && !p.groups.empty()) at = &p;
  return at;
}

// The failures mid-step, by step: the groups hit (the last patch names them all) and the outcome.
struct Seen {
  std::set<uint32_t> hit;
  bool patched = false, aborted = false;
  double time_s = 0;  // the first word of it
};

std::map<uint64_t, Seen> failures_seen(const std::vector<report::EventRow>& events) {
  std::map<uint64_t, Seen> out;
  for (const auto& e : events) {
    auto step = step_of(e.detail);
    if (!step) continue;
    const bool cannot = e.kind == "step_aborted" && e.detail.find("cannot be patched") != std::string::npos;
    if (e.kind == "patch" || cannot) {
      auto [it, fresh] = out.try_emplace(*step);
      Seen& s = it->second;
      if (fresh) s.time_s = e.time_s;
      for (uint32_t g : groups_of(e.detail)) s.hit.insert(g);
      s.aborted = s.aborted || cannot;
    } else if (e.kind == "step_patched" && out.count(*step)) {
      out[*step].patched = true;
    }
  }
  return out;
}

// "masked" (SPARe's model), "spread" (masked only by spreading: no host up for some type), "wiped out".
std::string model_word(const StacksFailure& x) {
  if (!x.model_masked) return "wiped out";
  return x.model_spread && x.model_depth == 0 ? "spread" : "masked";
}

}  // namespace

size_t StacksFit::agreeing() const {
  size_t n = 0;
  for (const auto& f : failures) n += f.agree();
  for (const auto& p : plans) n += p.agree();
  return n;
}

Result<StacksFit> fit_stacks(const std::string& run_dir) {
  auto run = report::load_run(run_dir);
  if (!run) return run.error();
  StacksFit f;
  f.dir = run_dir;
  for (const auto& p : run->plans) {
    if (p.groups.empty()) continue;
    f.groups = uint32_t(p.groups.size());
    f.redundancy = p.redundancy;
    auto up = groups_up(p);
    auto d = model_depth(p, up);
    if (!d) return d.error().with_context("plan " + std::to_string(p.plan));
    f.plans.push_back({p.plan, p.step, uint32_t(std::count(up.begin(), up.end(), true)), p.depth, *d});
  }
  if (f.plans.empty())
    return fail(run_dir, ": no plan of data-parallel groups in plans.jsonl (a job with parallel.groups > 1 records them)");
  f.spread = std::any_of(run->events.begin(), run->events.end(), [](const report::EventRow& e) {
    return e.kind == "patch" && e.detail.find(" spread over groups up ") != std::string::npos;
  });
  for (const auto& [step, seen] : failures_seen(run->events)) {
    const report::PlanRecord* p = plan_at(run->plans, seen.time_s);
    if (!p) continue;
    auto up = groups_up(*p);
    StacksFailure x;
    x.step = step;
    x.hit.assign(seen.hit.begin(), seen.hit.end());
    x.down_before = uint32_t(std::count(up.begin(), up.end(), false));
    for (uint32_t g : x.hit)
      if (g < up.size()) up[g] = false;
    auto d = model_depth(*p, up);
    if (!d) return d.error().with_context("step " + std::to_string(step));
    x.model_depth = *d;
    x.model_spread = f.spread;
    x.model_masked = f.spread ? std::count(up.begin(), up.end(), true) > 0 : *d > 0;
    x.run_patched = seen.patched && !seen.aborted;
    f.failures.push_back(std::move(x));
  }
  if (auto mu = algo::mean_failures_endured(int(f.groups), int(f.redundancy)); mu) f.mean_endured = *mu;
  return f;
}

std::string stacks_fit_text(const StacksFit& f) {
  std::string out = "run " + f.dir + ": " + std::to_string(f.groups) + " groups, r = " + std::to_string(f.redundancy) +
                    (f.spread ? ", patches spread over the groups up" : "");
  if (f.mean_endured) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (SPARe's model: %.2f failures endured before a wipe-out, on average)", *f.mean_endured);
    out += buf;
  }
  out += "\n\nfailures in the middle of a step: the run against SPARe's reordering model\n"
         "| step | groups hit | groups down before | run | model | model depth | agree |\n"
         "| ---: | --- | ---: | --- | --- | ---: | --- |\n";
  for (const auto& x : f.failures) {
    std::string hit;
    for (uint32_t g : x.hit) hit += (hit.empty() ? "" : ", ") + std::to_string(g);
    out += "| " + std::to_string(x.step) + " | " + hit + " | " + std::to_string(x.down_before) + " | " +
           (x.run_patched ? "patched" : "aborted") + " | " + model_word(x) + " | " +
           std::to_string(x.model_depth) + " | " + (x.agree() ? "yes" : "NO") + " |\n";
  }
  if (f.failures.empty()) out += "| — | none | | | | | |\n";
  out += "\nplans: the all-reduce depth in force against the model's minimal depth for the groups up\n"
         "| plan | from step | groups up | run depth | model depth | agree |\n| ---: | ---: | ---: | ---: | ---: | --- |\n";
  for (const auto& p : f.plans)
    out += "| " + std::to_string(p.plan) + " | " + std::to_string(p.step) + " | " + std::to_string(p.groups_up) + " | " +
           std::to_string(p.run_depth) + " | " + std::to_string(p.model_depth) + " | " + (p.agree() ? "yes" : "NO") + " |\n";
  out += "\n" + std::to_string(f.agreeing()) + " of " + std::to_string(f.compared()) + " agree\n";
  return out;
}

nlohmann::ordered_json stacks_fit_json(const StacksFit& f) {
  nlohmann::ordered_json j;
  j["run"] = f.dir;
  j["groups"] = f.groups;
  j["redundancy"] = f.redundancy;
  j["mean_endured"] = f.mean_endured ? nlohmann::json(*f.mean_endured) : nlohmann::json();
  auto failures = nlohmann::ordered_json::array();
  for (const auto& x : f.failures)
    failures.push_back({{"step", x.step}, {"hit", x.hit}, {"down_before", x.down_before},
                        {"run", x.run_patched ? "patched" : "aborted"}, {"model", model_word(x)},
                        {"model_depth", x.model_depth}, {"agree", x.agree()}});
  j["failures"] = std::move(failures);
  auto plans = nlohmann::ordered_json::array();
  for (const auto& p : f.plans)
    plans.push_back({{"plan", p.plan}, {"step", p.step}, {"groups_up", p.groups_up}, {"run_depth", p.run_depth},
                     {"model_depth", p.model_depth}, {"agree", p.agree()}});
  j["plans"] = std::move(plans);
  j["agree"] = f.agreeing();
  j["compared"] = f.compared();
  return j;
}

}  // namespace sal::sim
