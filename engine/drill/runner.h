// runner.h — runs a drill (drill_spec.h) against a live job on the controller's loop. Step
// triggers fire when the job has committed that many steps (a kill `during` a point is armed then,
// so the node dies inside the next step); time triggers fire that long after the first committed
// step — or, for a drill that replays a trace, after the drill's start (the trace's clock).
// "random" targets are drawn, with the drill's seed, from the nodes taking part in training; a
// random kill that finds fewer of them than it asks for (a trace whose count drops while the mesh
// is still starting) owes the rest, killed as soon as nodes are ready, and an add that comes while
// kills are owed cancels them first: the mesh follows the trace's count instead of drifting above it.
// Every action and every refusal is an event ("drill", "drill_error"). With a duration the drill
// stops the job when it is over. At the end, check() turns the expectations into pass/fail lines.
// The drill's progress goes to the job's journal (the drill, when its clock started, each action
// fired, synced before it runs), so a controller killed by its drill — or otherwise — and resumed
// goes on with the same drill: what ran does not run again, and the clock keeps its origin.
#pragma once

#include <uv.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "drill/drill_spec.h"
#include "job/journal.h"
#include "mesh/controller.h"
#include "mesh/timer.h"

namespace sal::drill {

struct ExpectationResult {
  std::string what;
  bool ok = false;
  std::string detail;
};

class DrillRunner {
 public:
  // `resumed`: the progress a resumed controller's journal holds for this drill.
  DrillRunner(mesh::Controller& c, uv_loop_t* loop, DrillSpec spec, const job::DrillProgress* resumed = nullptr);
  ~DrillRunner();

  // Hooks into the controller (on_committed) and starts the clock.
  void start();
  const DrillSpec& spec() const { return spec_; }
  std::vector<ExpectationResult> check() const;
  nlohmann::ordered_json status() const;

 private:
  void on_committed(uint64_t step);
  void on_plan_sending(const wire::PlanUpdate& u);
  void tick();
  void fire(size_t i);
  Result<uint64_t> fault_step(wire::FaultPoint point) const;
  std::vector<NodeId> pick(const Action& a);
  std::vector<NodeId> holders(std::pair<int, int> unit) const;
  std::vector<NodeId> rack_nodes(const std::string& rack) const;
  void note(const std::string& kind, NodeId node, const std::string& detail);
  void set_clock_origin(double at_s);
  void kill_controller(const Action& a);
  void report_shortfall(size_t i, size_t found);
  void pay_owed_kills();
  uint32_t cancel_owed_kills(uint32_t adds);
  Status partition(NodeId id, uint64_t ms);
  double now_s() const;

  mesh::Controller& c_;
  DrillSpec spec_;
  mesh::Timer timer_;
  std::vector<bool> fired_;
  std::mt19937_64 rng_;
  std::function<void(uint64_t)> previous_hook_;
  std::function<void(const wire::PlanUpdate&)> previous_plan_hook_;
  std::vector<size_t> migration_kills_;  // fired actions waiting for a plan switch that moves state
  struct Owed {
    size_t action;   // the random kill that found too few nodes
    uint32_t count;  // nodes it still has to kill
  };
  std::vector<Owed> owed_kills_;  // oldest first; not journaled (a resumed controller owes nothing)
  std::set<NodeId> killed_;       // nodes this drill killed: live until their loss is seen, never picked again
  double first_step_s_ = -1;   // controller time of the first committed step
  double origin_s_ = -1;       // controller time the clock started (start(), or the first committed step)
  bool resumed_ = false;
  double clock_origin_s() const { return origin_s_; }
  double first_action_s_ = -1;
  // throughput before the first action, and over the whole drill
  uint64_t pre_tokens_ = 0, all_tokens_ = 0;
  double pre_first_s_ = -1, pre_last_s_ = -1, all_last_s_ = -1;
  bool stopped_ = false;
};

}  // namespace sal::drill
