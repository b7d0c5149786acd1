// run_record.cpp — see run_record.h.
#include "mesh/run_record.h"

#include <algorithm>

#include "core/strings.h"

namespace sal::mesh {

RunRecord::~RunRecord() {
  if (timeline_) std::fclose(timeline_);
  if (plans_) std::fclose(plans_);
}

Status RunRecord::open(const std::string& dir, bool append) {
  timeline_ = std::fopen((dir + "/timeline.csv").c_str(), append ? "a" : "w");
  if (!timeline_) return fail("cannot write ", dir, "/timeline.csv");
  if (std::ftell(timeline_) == 0) std::fputs("start_s,end_s,phase,detail\n", timeline_);
  std::fflush(timeline_);
  plans_ = std::fopen((dir + "/plans.jsonl").c_str(), append ? "a" : "w");
  if (!plans_) return fail("cannot write ", dir, "/plans.jsonl");
  return {};
}

void RunRecord::phase(const std::string& phase, double now_s, const std::string& detail) {
  if (phase == phase_) return;
  close(now_s);
  phase_ = phase;
  detail_ = detail;
  since_s_ = now_s;
}

void RunRecord::close(double now_s) {
  if (phase_.empty()) return;
  double s = std::max(0.0, now_s - since_s_);
  auto it = std::find_if(totals_.begin(), totals_.end(), [&](const auto& t) { return t.first == phase_; });
  if (it == totals_.end()) totals_.push_back({phase_, s});
  else it->second += s;
  if (timeline_) {
    std::fprintf(timeline_, "%.3f,%.3f,%s,%s\n", since_s_, now_s, phase_.c_str(), csv_field(detail_).c_str());
    std::fflush(timeline_);
  }
  phase_.clear();
}

double RunRecord::seconds_in(const std::string& phase) const {
  for (const auto& [p, s] : totals_)
    if (p == phase) return s;
  return 0;
}

void RunRecord::plan(const AppliedPlan& p, double now_s, const std::vector<std::vector<double>>& loads) {
  if (!plans_) return;
  nlohmann::ordered_json j;
  j["plan"] = p.number();
  j["step"] = p.from_step;
  j["time_s"] = now_s;
  std::vector<std::string> workers;
  for (const auto& r : p.ranks) workers.push_back(std::to_string(r.node) + "." + std::to_string(r.index));
  j["workers"] = workers;
  auto placement = nlohmann::json::array();
  for (const auto& layer : p.plan.layers) placement.push_back(layer.placement);
  j["placement"] = placement;
  j["loads"] = loads;
  if (!p.plan.groups.empty()) {  // a plan of data-parallel groups: their sizes and the shard stacks
    j["groups"] = p.plan.groups;
    j["stacks"] = {{"redundancy", p.plan.stacks.redundancy}, {"hosts", p.plan.stacks.hosts},
                   {"assignment", p.plan.stacks.assignment}, {"depth", p.plan.stacks.depth()}};
  }
  std::fprintf(plans_, "%s\n", j.dump().c_str());
  std::fflush(plans_);
}

nlohmann::ordered_json RunRecord::summary() const {
  nlohmann::ordered_json j;
  auto list = nlohmann::json::array();
  std::vector<double> secs;
  double capacity_s = 0;
  double interrupted_s = 0;
  for (const auto& r : recoveries_) {
    nlohmann::json e{{"cause", r.cause}, {"kind", r.kind}, {"at_s", r.at_s}, {"seconds", r.seconds}, {"step", r.step}};
    if (!r.source.empty()) e["source"] = r.source, e["rerun"] = r.rerun;  // a restore: from where, steps run again
    if (r.capacity_wait_s > 0) e["capacity_wait_s"] = r.capacity_wait_s;  // apart from `seconds`, the engine's
    if (r.interrupted_s > 0) e["interrupted_s"] = r.interrupted_s;        // likewise
    list.push_back(std::move(e));
    secs.push_back(r.seconds);
    capacity_s += r.capacity_wait_s;
    interrupted_s += r.interrupted_s;
  }
  std::sort(secs.begin(), secs.end());
  j["lost_steps"] = lost_steps_;
  j["restores"] = restores_;
  j["recoveries"] = list;
  j["recovery_p50_s"] = secs.empty() ? nlohmann::json() : nlohmann::json(secs[(secs.size() - 1) / 2]);
  j["recovery_max_s"] = secs.empty() ? nlohmann::json() : nlohmann::json(secs.back());
  j["capacity_wait_s"] = capacity_s;
  j["interrupted_s"] = interrupted_s;
  nlohmann::ordered_json time;
  for (const auto& [p, s] : totals_) time[p] = s;
  j["time_s"] = time;
  return j;
}

}  // namespace sal::mesh
