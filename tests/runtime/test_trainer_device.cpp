// test_trainer_device.cpp — the Trainer's device seam (device_compute.h) without a GPU. A stand-in
// DeviceCompute that computes on its own host copy of the units (model::MoeGpt, LocalExchange,
// apply_adamw), so nothing of the Trainer's host Params can leak into it except through load(),
// and nothing back except through store() and its snapshots. Driven side by side with a CPU
// Trainer through plans, steps, commits, a discarded step, a re-plan, snapshots and a save, it
// must train the same and its units must come down whenever they leave: a GPU worker's
// bookkeeping, checked here where a GPU is not needed. Snapshots: the stand-in stages a copy at
// begin_snapshot() (as the GPU's copy, ordered after the commits before it) and hands it over at
// finish_snapshot(); the Trainer must not download for them, must give the units of the step the
// snapshot was taken at even when later steps commit before the writer takes them, must keep one
// snapshot in flight at a time (a second waits), and must turn a failed copy into a failed
// snapshot. A plan of two ranks: the stand-in, handed the plan's data plane by set_plan(), trains
// as two CPU Trainers do (DistributedExchange, the same gradient sync and norm). Also: what a
// device worker refuses (a cuda device in a build without CUDA, a factory's error).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <unistd.h>

#include "comm/store_server.h"
#include "comm/workers.h"
#include "ckpt/format.h"
#include "model/local_exchange.h"
#include "model/optimizer.h"
#include "runtime/distributed_exchange.h"
#include "runtime/on_device.h"
#include "ckpt/writer.h"
#include "runtime/trainer.h"
#include "runtime/trainer_fixtures.h"

using namespace sal;
using namespace sal::runtime;

namespace {

struct Calls {
  int opened = -1;  // the ordinal the factory was asked for
  int loads = 0, stores = 0, updates = 0, zeroes = 0, uploads = 0;
  // store_units and move_experts: the calls, the units brought down, the experts uploaded and dropped
  int unit_stores = 0, units_stored = 0, moves = 0, moved_in = 0, moved_out = 0;
  int backups = 0;  // backup_grads (a grouped step's)
  // set_plan: the calls, the last one's data plane (size and rank; 0 and -1 for none) and replicas
  int plans = 0, plan_size = 0, plan_rank = -1, syncs = 0;
  std::vector<runtime::Counts> plan_replicas;
  std::vector<std::string> prefixes;  // each set_plan's device_prefix, with a * when it reuses the plane
  std::string key;                    // what device_key() answers
  int aborts = 0, clears = 0;
  int snapshots = -1;  // DeviceOptions::snapshots the device was opened with
  std::vector<std::pair<int, int>> last_held;
  // snapshots: begun and finished; begins while every slot was held (the Trainer must never make
  // one); the device's staging slots
  int begun = 0, finished = 0, overlapping = 0, slots = 1;
  std::string fail_begin, fail_finish;  // the next begin / finish fails with this, once
};

model::Unit* unit_of(model::Params& p, const model::UnitId& id) {
  switch (id.kind) {
    case model::UnitKind::embedding: return &p.embedding;
    case model::UnitKind::dense: return &p.dense.at(size_t(id.layer));
    case model::UnitKind::gate: return &p.gate.at(size_t(id.layer));
    case model::UnitKind::expert: return p.expert(id.layer, id.expert);
  }
  return nullptr;
}

// A "device" that is a second copy of the units on the host.
class HostDevice final : public DeviceCompute {
 public:
  HostDevice(const DeviceOptions& o, Calls& c) : optim_(o.optim), calls_(c) { c.snapshots = o.snapshots; }

  Status load(const model::Params& host, const std::vector<std::pair<int, int>>& held) override {
    ++calls_.loads;
    calls_.last_held = held;
    model::Params p;
    p.dims = host.dims;
    p.embedding = host.embedding;
    p.dense = host.dense;
    p.gate = host.gate;
    for (auto key : held) {
      auto it = host.experts.find(key);
      if (it == host.experts.end()) return fail("host lacks a held expert");
      p.experts[key] = it->second;
    }
    p.zero_grads();
    params_ = std::move(p);
    comm_ = nullptr;
    return {};
  }
  // A device data plane, when the plan names one, is not connected (the host plane serves both):
  // the stand-in only keeps the books of holding one, as the GPU's does.
  Status set_plan(const DevicePlan& plan) override {
    ++calls_.plans;
    calls_.plan_size = plan.comm ? plan.comm->size() : 0;
    calls_.plan_rank = plan.comm ? plan.comm->rank() : -1;
    calls_.plan_replicas = plan.replicas;
    calls_.prefixes.push_back(plan.device_prefix + (plan.reuse_device_plane ? "*" : ""));
    if (!plan.device_prefix.empty() && !plan.store) return fail("a device data plane without a store");
    if (plan.reuse_device_plane && !plane_) return fail("no device data plane to reuse");
    if (plan.comm) plane_ = !plan.device_prefix.empty();
    comm_ = plan.comm && plan.comm->size() > 1 ? plan.comm : nullptr;
    replicas_ = plan.replicas;
    group_ = plan.group;
    group_replicas_ = plan.group_replicas;
    before_alltoall_ = plan.before_alltoall;
    return {};
  }
  std::string device_key() const override { return calls_.key; }
  bool device_plane_ready() const override { return plane_; }
  void abort(const std::string&) override {
    ++calls_.aborts;
    plane_ = false;
  }
  void clear_abort() override { ++calls_.clears; }
  // As Trainer::sync_gradients on a CPU rank.
  Status sync_gradients(const std::vector<SharedExpert>& shared) override {
    ++calls_.syncs;
    if (!comm_) return {};
    SAL_TRY(sum_dense_gradients(*comm_, params_));
    return reduce_among_holders(*comm_, comm_->rank(), shared, params_);
  }
  Status store(model::Params& host) override {
    ++calls_.stores;
    for (model::Unit* u : params_.units()) {
      model::Unit* h = unit_of(host, u->id);
      if (!h) return fail("host lacks ", u->id.name());
      h->w = u->w, h->m = u->m, h->v = u->v;
    }
    return {};
  }
  Status store_units(model::Params& host, const std::vector<model::UnitId>& ids) override {
    ++calls_.unit_stores;
    for (const model::UnitId& id : ids) {
      model::Unit* from = unit_of(params_, id);
      model::Unit* to = unit_of(host, id);
      if (!from || !to) return fail("store_units: ", id.name(), " is not held on both sides");
      to->w = from->w, to->m = from->m, to->v = from->v;
      ++calls_.units_stored;
    }
    return {};
  }
  Status move_experts(const model::Params& host, const std::vector<std::pair<int, int>>& held) override {
    ++calls_.moves;
    calls_.last_held = held;
    const std::set<std::pair<int, int>> want(held.begin(), held.end());
    for (auto it = params_.experts.begin(); it != params_.experts.end();) {
      if (want.count(it->first)) {
        ++it;
        continue;
      }
      it = params_.experts.erase(it);
      ++calls_.moved_out;
    }
    for (auto key : want) {
      if (params_.experts.count(key)) continue;
      auto it = host.experts.find(key);
      if (it == host.experts.end()) return fail("host lacks a held expert");
      model::Unit u = it->second;
      u.zero_grad();
      params_.experts[key] = std::move(u);
      ++calls_.moved_in;
    }
    return {};
  }
  Status upload_units(const model::Params& host, const std::vector<model::UnitId>& ids) override {
    ++calls_.uploads;
    model::Params& h = const_cast<model::Params&>(host);
    for (const model::UnitId& id : ids) {
      model::Unit* from = unit_of(h, id);
      model::Unit* to = unit_of(params_, id);
      if (!from || !to) return fail("upload_units: ", id.name(), " is not held on both sides");
      to->w = from->w, to->m = from->m, to->v = from->v, to->frozen = from->frozen;
    }
    return {};
  }
  Status zero_grads() override {
    ++calls_.zeroes;
    params_.zero_grads();
    return {};
  }
  Result<model::StepStats> step(const model::Batch& b, int64_t global_tokens) override {
    model::MoeGpt m(params_);
    m.set_aux_share(b.aux_share);
    if (group_) {  // a grouped plan's tokens cross the group's plane
      DistributedExchange ex(*group_, params_, group_replicas_);
      ex.before_alltoall = before_alltoall_;
      return m.step(b, global_tokens, ex);
    }
    if (comm_) {
      DistributedExchange ex(*comm_, params_, replicas_);
      ex.before_alltoall = before_alltoall_;
      return m.step(b, global_tokens, ex);
    }
    model::LocalExchange ex(params_);
    return m.step(b, global_tokens, ex);
  }
  // As Trainer::global_norm with several ranks (each expert divided among its holders).
  Result<double> grad_norm() override {
    double s = 0, experts = 0;
    for (model::Unit* u : params_.units()) {
      if (!comm_ || u->id.kind != model::UnitKind::expert) {
        s += model::grad_sum_squares(*u);
        continue;
      }
      const auto& holders = replicas_[size_t(u->id.layer)][size_t(u->id.expert)];
      double h = double(std::count_if(holders.begin(), holders.end(), [](uint32_t x) { return x > 0; }));
      experts += model::grad_sum_squares(*u) / std::max(h, 1.0);
    }
    if (comm_) SAL_TRY(comm_->allreduce_sum(&experts, 1));
    return std::sqrt(s + experts);
  }
  Status sync_gradients_over(comm::Collectives& comm, const std::vector<SharedExpert>& shared) override {
    ++calls_.syncs;
    if (comm.size() <= 1) return {};
    SAL_TRY(sum_dense_gradients(comm, params_));
    return reduce_among_holders(comm, comm.rank(), shared, params_);
  }
  Result<double> grad_norm_over(comm::Collectives& comm, const std::vector<Counts>& replicas) override {
    return global_grad_norm(comm, params_, replicas);
  }
  Status backup_grads() override {
    ++calls_.backups;
    backup_.clear();
    for (const model::Unit* u : params_.units()) backup_.push_back(u->g);
    return {};
  }
  Status restore_grads() override {
    auto units = params_.units();
    if (backup_.size() != units.size()) return fail("no gradients set aside");
    for (size_t i = 0; i < units.size(); ++i) units[i]->g = backup_[i];
    return {};
  }
  Status update(double lr, double grad_scale, int64_t t) override {
    ++calls_.updates;
    model::apply_adamw(params_, optim_, lr, grad_scale, t);
    return {};
  }
  // The GPU copies at begin (after the commits so far) into memory of its own, a slot, which it
  // lends until the views finish_snapshot() gave are dropped: so does this.
  Result<uint64_t> begin_snapshot(const std::vector<model::UnitId>& ids) override {
    std::lock_guard<std::mutex> lock(staging_->mu);
    if (int(staging_->held.size()) >= calls_.slots) {
      ++calls_.overlapping;
      return fail("every staging slot is held");
    }
    if (!calls_.fail_begin.empty()) return fail(std::exchange(calls_.fail_begin, ""));
    std::vector<model::Unit> copy;
    for (const auto& id : ids) {
      model::Unit* u = unit_of(params_, id);
      if (!u) return fail("the device holds no ", id.name());
      model::Unit c;
      c.id = id, c.w = u->w, c.m = u->m, c.v = u->v;
      copy.push_back(std::move(c));
    }
    ++calls_.begun;
    staging_->held[++staging_->tickets] = std::move(copy);
    return staging_->tickets;
  }
  Result<model::UnitViews> finish_snapshot(uint64_t ticket) override {
    std::lock_guard<std::mutex> lock(staging_->mu);
    auto it = staging_->held.find(ticket);
    if (it == staging_->held.end()) return fail("no snapshot ", ticket, " staged");
    ++calls_.finished;
    if (!calls_.fail_finish.empty()) {
      staging_->held.erase(it);
      return fail(std::exchange(calls_.fail_finish, ""));
    }
    model::UnitViews views;
    for (const model::Unit& u : it->second)
      views.units.push_back(model::UnitView{u.id, u.w.data(), u.m.data(), u.v.data(), u.w.size()});
    auto staging = staging_;
    views.keep = std::shared_ptr<const void>(staging.get(), [staging, ticket](const void*) {
      std::lock_guard<std::mutex> lock(staging->mu);
      staging->held.erase(ticket);
    });
    return views;
  }
  int snapshot_slots() const override { return calls_.slots; }

 private:
  model::OptimConfig optim_;
  Calls& calls_;
  model::Params params_;
  comm::Collectives* comm_ = nullptr;  // with several ranks only
  std::vector<Counts> replicas_;
  comm::Collectives* group_ = nullptr;  // a grouped plan's group plane
  std::vector<Counts> group_replicas_;
  std::vector<std::vector<float>> backup_;  // backup_grads()
  std::function<void()> before_alltoall_;
  struct Staging {  // shared with the views lent
    std::mutex mu;
    std::map<uint64_t, std::vector<model::Unit>> held;  // begun, until their views are dropped
    uint64_t tickets = 0;
  };
  std::shared_ptr<Staging> staging_ = std::make_shared<Staging>();
  bool plane_ = false;  // holds a (make-believe) device data plane that was not aborted
};

double rel(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

void check_close(const model::Unit& a, const model::Unit& b, double tol) {
  CAPTURE(a.id.name());
  REQUIRE(a.w.size() == b.w.size());
  double worst = 0;
  for (size_t i = 0; i < a.w.size(); ++i) worst = std::max(worst, double(std::abs(a.w[i] - b.w[i])));
  CHECK(worst <= tol);
}

// The largest difference of any value or moment between two lists of the same units.
double max_diff(const std::vector<model::Unit>& a, const std::vector<model::Unit>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].id.name());
    REQUIRE(a[i].id == b[i].id);
    for (auto part : {&model::Unit::w, &model::Unit::m, &model::Unit::v}) {
      REQUIRE((a[i].*part).size() == (b[i].*part).size());
      for (size_t j = 0; j < (a[i].*part).size(); ++j)
        worst = std::max(worst, double(std::abs((a[i].*part)[j] - (b[i].*part)[j])));
    }
  }
  return worst;
}

// The units of a snapshot, taken now and copied (the views are dropped: the slot is free again).
std::vector<model::Unit> take(Result<ckpt::SnapshotUnits>& r) {
  if (!r.ok()) FAIL(r.error().message());
  auto units = (*r)();
  if (!units.ok()) FAIL(units.error().message());
  return model::copy_units(*units);
}

DeviceFactory stand_in(Calls& calls) {
  return [&calls](int ordinal, const DeviceOptions& o) -> Result<std::unique_ptr<DeviceCompute>> {
    calls.opened = ordinal;
    return std::unique_ptr<DeviceCompute>(new HostDevice(o, calls));
  };
}

// A CPU Trainer and a stand-in device Trainer stepped side by side on plans of one rank.
// A snapshot asked of `t` on a thread of its own, as the worker's next snapshot request would be
// while the writer still holds an earlier one.
class Asker {
 public:
  explicit Asker(Trainer& t) : thread_([this, &t] {
    auto r = t.snapshot_share();
    answered_ = true;
    promise_.set_value(std::move(r));
  }) {}
  ~Asker() {
    if (thread_.joinable()) thread_.join();
  }
  // Still not answered 300 ms after the ask: it waits for a slot.
  bool still_waiting() {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return !answered_.load();
  }
  // The answer, once a slot came free (within 10 s, or the test fails).
  Result<ckpt::SnapshotUnits> answer() {
    auto f = promise_.get_future();
    REQUIRE(f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    thread_.join();
    return f.get();
  }

 private:
  std::atomic<bool> answered_{false};
  std::promise<Result<ckpt::SnapshotUnits>> promise_;
  std::thread thread_;
};

// A double as its exact decimal text (a report's value), and back; the test fails when the report
// lacks the key.
std::string exact(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}
double report_number(const std::string& report, const std::string& key) {
  std::string v = test::report_value(report, key);
  REQUIRE_MESSAGE(!v.empty(), key);
  return std::stod(v);
}

// Two ranks, each `body` in a process of its own (forked before any thread starts here), given a
// rendezvous store; their reports.
std::vector<std::string> two_ranks(std::string (*body)(int, const std::string&)) {
  test::Workers w(2, body);
  zmq::context_t zmq(1);
  comm::StoreServer server{zmq, "tcp://127.0.0.1:*"};
  auto ep = server.start();
  REQUIRE(ep.ok());
  w.go(*ep);
  auto reports = w.collect(60000);
  REQUIRE(reports.size() == 2);
  return reports;
}

struct Pair {
  Store s1, s2;
  zmq::context_t zmq{1};
  Calls calls;
  Trainer cpu{zmq, spec("cpu:0")};
  Trainer dev{zmq, spec("cuda:0"), stand_in(calls)};
  explicit Pair(int slots = 1) {
    calls.slots = slots;  // the stand-in device's snapshot slots, read when the Trainer opens it
    REQUIRE(cpu.init().ok());
    REQUIRE(dev.init().ok());
    REQUIRE(cpu.apply_plan(plan_update(1, 0, s1.endpoint)).ok());
    REQUIRE(dev.apply_plan(plan_update(1, 0, s2.endpoint)).ok());
  }
  void step(uint64_t s) {
    REQUIRE(cpu.step(s).ok());
    REQUIRE(dev.step(s).ok());
  }
  void commit(uint64_t s) {
    REQUIRE(cpu.commit(s).ok());
    REQUIRE(dev.commit(s).ok());
  }
};

}  // namespace

// One rank of the two-rank test, in its own process (the data plane's socket bookkeeping is per
// process). The test forks its ranks, so it comes first in this file: Gloo's event loop thread,
// started by the first data plane a process connects, does not survive a fork (ctest runs each
// case in its own process anyway). A device Trainer on a GPU of its own (device keys differ) trains
// 3 steps in plan 1, one more in plan 4 (the same ranks: its device plane is kept), after an abort
// applies plan 5 (a new plane) and then plan 6 with the ranks swapped (another new plane); a CPU Trainer trains the same 3 steps in plan 2, and a device
// Trainer sharing its GPU with the other rank (equal keys) the same in plan 3. Reports what
// set_plan() was given and each step's loss and norm.
static std::string two_rank_body(int rank, const std::string& endpoint) {
  test::Report rep;
  zmq::context_t zmq(1);
  Calls calls;
  struct Round {
    const char* device;
    std::string key, name;
  };
  const Round rounds[] = {{"cuda:0", "gpu-" + std::to_string(rank), "dev"}, {"cpu:0", "", "cpu"},
                          {"cuda:0", "gpu-shared", "shared"}};
  for (uint64_t number = 1; number <= 3; ++number) {
    const Round& round = rounds[number - 1];
    const char* device = round.device;
    bool dev = device[1] == 'u';
    calls.key = round.key;
    Trainer t(zmq, spec(device), dev ? stand_in(calls) : DeviceFactory{});
    auto s = t.init();
    rep.check(s.ok(), std::string("init ") + device);
    if (!s.ok()) return rep.text();
    s = t.apply_plan(plan_update(number, 0, endpoint, 2, rank));
    rep.check(s.ok(), std::string("apply_plan ") + device + ": " + (s.ok() ? "" : s.error().message()));
    if (!s.ok()) return rep.text();
    for (uint64_t step = 0; step < 3; ++step) {
      auto o = t.step(step);
      rep.check(o.ok(), "step " + std::to_string(step) + ": " + (o.ok() ? "" : o.error().message()));
      if (!o.ok()) return rep.text();
      rep.check(t.commit(step).ok(), "commit");
      std::string key = round.name + "." + std::to_string(step);
      rep.note(key + ".ce=" + exact(o->stats.ce_sum));
      rep.note(key + ".norm=" + exact(o->grad_norm));
    }
    if (number != 1) continue;
    // the same ranks on the same GPUs again: the plane is kept, and training goes on over it
    s = t.apply_plan(plan_update(4, 3, endpoint, 2, rank));
    rep.check(s.ok(), std::string("apply_plan 4: ") + (s.ok() ? "" : s.error().message()));
    if (!s.ok()) return rep.text();
    auto o = t.step(3);
    rep.check(o.ok() && t.commit(3).ok(), "step 3 in plan 4");
    // after an abort the device's plane is not ready: the next plan connects another
    t.abort("drill");
    t.clear_abort();
    s = t.apply_plan(plan_update(5, 4, endpoint, 2, rank));
    rep.check(s.ok(), std::string("apply_plan 5: ") + (s.ok() ? "" : s.error().message()));
    // the same GPUs as other ranks (the two swap ranks): a plane of other ranks, so another
    s = t.apply_plan(plan_update(6, 4, endpoint, 2, 1 - rank));
    rep.check(s.ok(), std::string("apply_plan 6: ") + (s.ok() ? "" : s.error().message()));
  }
  rep.note("loads=" + std::to_string(calls.loads));
  rep.note("plans=" + std::to_string(calls.plans));
  rep.note("plan_size=" + std::to_string(calls.plan_size));
  rep.note("plan_rank=" + std::to_string(calls.plan_rank));
  rep.note("syncs=" + std::to_string(calls.syncs));
  std::string prefixes;
  for (const std::string& p : calls.prefixes) prefixes += "[" + p + "]";
  rep.note("prefixes=" + prefixes);
  bool every_expert_once_each = calls.plan_replicas.size() == 2;
  for (const auto& layer : calls.plan_replicas) {
    every_expert_once_each = every_expert_once_each && layer.size() == 4;
    for (const auto& e : layer) every_expert_once_each = every_expert_once_each && e == std::vector<uint32_t>{1, 1};
  }
  rep.note(std::string("replicas=") + (every_expert_once_each ? "each expert once on each rank" : "wrong"));
  return rep.text();
}

TEST_CASE("two device Trainers in a plan of two ranks get its data plane, a device plane only on GPUs of their own, and train as two CPU Trainers") {
  auto reports = two_ranks(two_rank_body);
  for (int r = 0; r < 2; ++r) {
    const std::string& rep = reports[size_t(r)];
    CAPTURE(r);
    CAPTURE(rep);
    REQUIRE(rep.rfind("OK\n", 0) == 0);
    // set_plan: first letting go of any data plane (before connecting), then after the load with
    // the plan's, and its replicas; a device plane for plan 1 (GPUs of their own), none for plan 3
    // (one GPU shared)
    // (plan 4 keeps plan 1's plane; plan 5, after an abort, connects its own; so does plan 6, whose
    // ranks are swapped)
    CHECK(test::report_value(rep, "loads") == "2");  // plans 4 to 6 leave the units as they are
    CHECK(test::report_value(rep, "plans") == "10");
    CHECK(test::report_value(rep, "plan_size") == "2");
    CHECK(test::report_value(rep, "plan_rank") == std::to_string(r));
    CHECK(test::report_value(rep, "replicas") == "each expert once on each rank");
    CHECK(test::report_value(rep, "syncs") == "7");
    CHECK(test::report_value(rep, "prefixes") ==
          "[][plan-1/device][][plan-4/device*][][plan-5/device][][plan-6/device][][]");
    for (int i = 0; i < 3; ++i) {
      CAPTURE(i);
      std::string n(".");
      n += std::to_string(i);
      const std::string cpu = "cpu" + n;
      for (const std::string& name : {std::string("dev"), std::string("shared")}) {
        const std::string dev = name + n;
        CHECK(rel(report_number(rep, dev + ".ce"), report_number(rep, cpu + ".ce")) < 1e-5);
        CHECK(rel(report_number(rep, dev + ".norm"), report_number(rep, cpu + ".norm")) < 1e-4);
        CHECK(report_number(rep, dev + ".norm") == report_number(reports[size_t(1 - r)], dev + ".norm"));  // one global norm
      }
    }
  }
  // each rank computed its own half of the batch
  CHECK(report_number(reports[0], "dev.0.ce") != report_number(reports[1], "dev.0.ce"));
}

// One rank of the grouped test: a plan of two ranks in two data-parallel groups of one (each holds
// every expert and computes one shard type of the batch), 3 steps by a device Trainer and the same
// by a CPU Trainer. Reports each step's loss and norm, and the device's grouped calls.
static std::string grouped_body(int rank, const std::string& endpoint) {
  test::Report rep;
  zmq::context_t zmq(1);
  Calls calls;
  for (uint64_t number : {11, 12}) {
    const bool dev = number == 11;
    Trainer t(zmq, spec(dev ? "cuda:0" : "cpu:0"), dev ? stand_in(calls) : DeviceFactory{});
    auto s = t.init();
    rep.check(s.ok(), "init");
    if (!s.ok()) return rep.text();
    wire::PlanUpdate p = plan_update(number, 0, endpoint, 2, rank);
    p.plan.groups = {1, 1};
    p.plan.stacks.assignment = {{0}, {1}};
    s = t.apply_plan(p);
    rep.check(s.ok(), std::string("apply_plan: ") + (s.ok() ? "" : s.error().message()));
    if (!s.ok()) return rep.text();
    for (uint64_t step = 0; step < 3; ++step) {
      auto o = t.step(step);
      rep.check(o.ok(), "step " + std::to_string(step) + ": " + (o.ok() ? "" : o.error().message()));
      if (!o.ok()) return rep.text();
      rep.check(t.commit(step).ok(), "commit");
      std::string key = std::string(dev ? "dev" : "cpu") + "." + std::to_string(step);
      rep.note(key + ".ce=" + exact(o->stats.ce_sum));
      rep.note(key + ".norm=" + exact(o->grad_norm));
    }
  }
  rep.note("backups=" + std::to_string(calls.backups));
  rep.note("syncs=" + std::to_string(calls.syncs));
  return rep.text();
}

TEST_CASE("device Trainers in data-parallel groups train as CPU Trainers in the same groups") {
  auto reports = two_ranks(grouped_body);
  for (int r = 0; r < 2; ++r) {
    const std::string& rep = reports[size_t(r)];
    CAPTURE(r);
    CAPTURE(rep);
    REQUIRE(rep.rfind("OK\n", 0) == 0);
    CHECK(test::report_value(rep, "backups") == "3");  // the step's gradients set aside on the device
    CHECK(test::report_value(rep, "syncs") == "3");    // phase B through the device, once a step
    for (int i = 0; i < 3; ++i) {
      CAPTURE(i);
      const std::string n = "." + std::to_string(i);
      CHECK(rel(report_number(rep, "dev" + n + ".ce"), report_number(rep, "cpu" + n + ".ce")) < 1e-5);
      CHECK(rel(report_number(rep, "dev" + n + ".norm"), report_number(rep, "cpu" + n + ".norm")) < 1e-4);
      const std::string norm = "dev" + n + ".norm";
      CHECK(report_number(rep, norm) == report_number(reports[size_t(1 - r)], norm));  // one global norm
    }
  }
  // each group computed its own shard type
  CHECK(report_number(reports[0], "dev.0.ce") != report_number(reports[1], "dev.0.ce"));
}

TEST_CASE("a Trainer on a device trains as the host Trainer does and brings its units down whenever they leave") {
  Store s1, s2;
  zmq::context_t zmq(1);
  Calls calls;
  DeviceFactory factory = [&calls](int ordinal, const DeviceOptions& o) -> Result<std::unique_ptr<DeviceCompute>> {
    calls.opened = ordinal;
    return std::unique_ptr<DeviceCompute>(new HostDevice(o, calls));
  };
  Trainer cpu(zmq, spec("cpu:0"), factory);  // a CPU device never asks the factory
  Trainer dev(zmq, spec("cuda:3"), factory);
  REQUIRE(cpu.init().ok());
  CHECK(calls.opened == -1);
  REQUIRE(dev.init().ok());
  CHECK(calls.opened == 3);

  // restore: the dense-checkpoint fallback, from the seed (no directory)
  auto both_plan = [&](uint64_t number, uint64_t step, bool restore = false) {
    wire::PlanUpdate pa = plan_update(number, step, s1.endpoint), pb = plan_update(number, step, s2.endpoint);
    pa.restore = pb.restore = restore;
    auto a = cpu.apply_plan(pa);
    auto b = dev.apply_plan(pb);
    REQUIRE(a.ok());
    if (!b.ok()) FAIL(b.error().message());
  };
  // one step on both; the device's figures against the host's
  auto both_step = [&](uint64_t step) {
    auto a = cpu.step(step);
    auto b = dev.step(step);
    REQUIRE(a.ok());
    if (!b.ok()) FAIL(b.error().message());
    CAPTURE(step);
    CHECK(rel(b->stats.ce_sum, a->stats.ce_sum) < 1e-4);
    CHECK(rel(b->stats.aux, a->stats.aux) < 1e-4);
    CHECK(rel(b->grad_norm, a->grad_norm) < 1e-3);
    CHECK(b->stats.tokens == a->stats.tokens);
    CHECK(b->stats.expert_counts == a->stats.expert_counts);
    CHECK(b->lr == a->lr);
    return b->stats.ce_sum;
  };
  auto both_commit = [&](uint64_t step) {
    REQUIRE(cpu.commit(step).ok());
    REQUIRE(dev.commit(step).ok());
  };

  both_plan(1, 0);
  CHECK(calls.loads == 1);
  CHECK(calls.stores == 0);  // nothing was committed on the device yet
  CHECK(calls.last_held.size() == 8);
  double first = 0, last = 0;
  for (uint64_t s = 0; s < 10; ++s) {
    double ce = both_step(s);
    if (s == 0) first = ce;
    last = ce;
    both_commit(s);
  }
  CHECK(last < first);
  CHECK(calls.updates == 10);

  // a discarded step leaves the parameters as they were: its repeat computes the same
  double ce = both_step(10);
  cpu.discard();
  dev.discard();
  CHECK(both_step(10) == ce);
  both_commit(10);

  // a re-plan that leaves this rank's units as they are keeps them on the device: nothing comes
  // down, nothing goes up
  both_plan(2, 11);
  CHECK(calls.stores == 0);
  CHECK(calls.loads == 1);
  // a re-plan that does not leave the units as they are (here a restore: every unit from the seed
  // again): the device's committed state comes down first, then the plan's units go up again
  both_plan(3, 11, true);
  CHECK(calls.stores == 1);
  CHECK(calls.loads == 2);
  CHECK(calls.last_held.size() == 8);
  // a snapshot comes from the device's own copy, never through the host Params
  auto snap_cpu = cpu.snapshot_share();
  auto snap_dev = dev.snapshot_share();
  auto units_cpu = take(snap_cpu), units_dev = take(snap_dev);
  CHECK(calls.stores == 1);
  CHECK(calls.begun == 1);
  CHECK(calls.finished == 1);
  REQUIRE(units_dev.size() == units_cpu.size());
  CHECK(units_dev.size() == 1 + 2 * 2 + 2 * 4);
  for (size_t i = 0; i < units_dev.size(); ++i) check_close(units_dev[i], units_cpu[i], 1e-4);

  for (uint64_t s = 11; s < 20; ++s) {
    both_step(s);
    both_commit(s);
  }
  // a snapshot after commits does not download either (the host Params stay behind), so the save
  // right after must
  snap_dev = dev.snapshot_share();
  take(snap_dev);
  CHECK(calls.stores == 1);
  CHECK(calls.begun == 2);
  std::string dir = std::filesystem::temp_directory_path().string() + "/sal-trainer-device-" + std::to_string(getpid());
  auto wa = cpu.save(dir + "/cpu", 20);
  auto wb = dev.save(dir + "/dev", 20);
  REQUIRE(wa.ok());
  REQUIRE(wb.ok());
  CHECK(*wa == *wb);
  CHECK(calls.stores == 2);
  CHECK(calls.overlapping == 0);
  // the controller writes a checkpoint's manifest once every rank has saved (here: this one)
  REQUIRE(ckpt::write_manifest(dir + "/cpu", 20, *wa, spec("cpu:0").dims).ok());
  REQUIRE(ckpt::write_manifest(dir + "/dev", 20, *wb, spec("cpu:0").dims).ok());
  auto pa = ckpt::load_all(dir + "/cpu");
  auto pb = ckpt::load_all(dir + "/dev");
  REQUIRE(pa.ok());
  REQUIRE(pb.ok());
  auto ua = pa->units(), ub = pb->units();
  REQUIRE(ua.size() == ub.size());
  CHECK(ua.size() == 1 + 2 * 2 + 2 * 4);
  for (size_t i = 0; i < ua.size(); ++i) check_close(*ub[i], *ua[i], 1e-4);
  // and the device's weights really trained: they left their start
  model::Unit init = model::make_unit(pb->dims, pb->embedding.id, 1);
  double moved = 0;
  for (size_t i = 0; i < init.w.size(); ++i) moved = std::max(moved, double(std::abs(pb->embedding.w[i] - init.w[i])));
  CHECK(moved > 1e-3);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a re-plan that only moves experts brings down the units sent away and moves only the experts that change") {
  Calls calls;
  const model::Dims dims = spec("cuda:0").dims;
  model::Params host = model::Params::create(dims, 1, model::Params::all_experts(dims));
  model::Params start = host;
  OnDevice dev(std::unique_ptr<DeviceCompute>(new HostDevice(DeviceOptions{}, calls)), host, "cuda:0");
  const HeldExperts all = model::Params::all_experts(dims);
  REQUIRE(dev.load(all).ok());
  REQUIRE(dev.update(1e-2, 1.0, 1).ok());  // weight decay moves the matrices: the host is behind
  const model::UnitId sent{model::UnitKind::expert, 1, 3};
  REQUIRE(dev.to_host({sent}).ok());
  CHECK(calls.unit_stores == 1);
  CHECK(calls.units_stored == 1);
  CHECK(calls.stores == 0);
  CHECK(host.expert(1, 3)->w != start.expert(1, 3)->w);  // the unit sent away, as trained
  CHECK(host.embedding.w == start.embedding.w);           // the rest stayed behind on the host
  const model::Unit trained_13 = *host.expert(1, 3);

  // the plan sends layer 1's expert 3 away: it goes, nothing else moves
  host.experts.erase({1, 3});
  HeldExperts without(all.begin(), all.end());
  without.erase(std::find(without.begin(), without.end(), std::pair<int, int>{1, 3}));
  REQUIRE(dev.move_experts(without).ok());
  CHECK(calls.loads == 1);
  CHECK(calls.moves == 1);
  CHECK(calls.moved_out == 1);
  CHECK(calls.moved_in == 0);
  CHECK(dev.holds(without));
  // a later plan brings it back (as another rank sent it): uploaded alone
  host.experts[{1, 3}] = trained_13;
  REQUIRE(dev.move_experts(all).ok());
  CHECK(calls.moved_in == 1);
  CHECK(calls.loads == 1);
  CHECK(calls.stores == 0);
  // everything comes down when asked: the units kept on the device carry their training
  REQUIRE(dev.to_host().ok());
  CHECK(calls.stores == 1);
  CHECK(host.embedding.w != start.embedding.w);
  CHECK(host.expert(1, 3)->w == trained_13.w);
  // with nothing on the device yet, a move is a load
  Calls fresh_calls;
  model::Params other = start;
  OnDevice fresh(std::unique_ptr<DeviceCompute>(new HostDevice(DeviceOptions{}, fresh_calls)), other, "cuda:0");
  REQUIRE(fresh.move_experts(all).ok());
  CHECK(fresh_calls.loads == 1);
  CHECK(fresh_calls.moves == 0);
}

TEST_CASE("a device Trainer refuses cuda devices it cannot open") {
  Store store;
  zmq::context_t zmq(1);
  Calls calls;
  DeviceFactory factory = [&calls](int, const DeviceOptions& o) -> Result<std::unique_ptr<DeviceCompute>> {
    return std::unique_ptr<DeviceCompute>(new HostDevice(o, calls));
  };
  Trainer dev(zmq, spec("cuda:0"), factory);
  REQUIRE(dev.init().ok());
  CHECK_FALSE(dev.step(0).ok());  // no plan in force
  REQUIRE(dev.apply_plan(plan_update(2, 0, store.endpoint)).ok());
  CHECK(dev.step(0).ok());
  CHECK(calls.plans == 2);
  CHECK(calls.plan_size == 1);  // one rank: the device's exchange stays local

  Trainer no_cuda(zmq, spec("cuda:0"));
  auto s = no_cuda.init();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message() ==
        "device cuda:0: this build of salamander has no CUDA path (nvcc was not found when it was built)");

  Trainer failing(zmq, spec("cuda:1"), [](int, const DeviceOptions&) -> Result<std::unique_ptr<DeviceCompute>> {
    return fail("cuda:1: no such GPU (this machine has 1 GPU: cuda:0)");
  });
  s = failing.init();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message() == "cuda:1: no such GPU (this machine has 1 GPU: cuda:0)");

  Trainer bad(zmq, spec("cuda:x"), factory);
  s = bad.init();
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message().find("is not cuda:N") != std::string::npos);
}

TEST_CASE("a device snapshot holds the step it was taken after even when the next steps commit before the writer takes it") {
  Pair p;
  for (uint64_t s = 0; s < 3; ++s) {
    p.step(s);
    p.commit(s);
  }
  // the snapshot after commit 2; then step 3 commits and step 4 runs before the units are taken
  auto snap_cpu = p.cpu.snapshot_share();
  auto snap_dev = p.dev.snapshot_share();
  p.step(3);
  p.commit(3);
  p.step(4);
  auto units_cpu = take(snap_cpu), units_dev = take(snap_dev);
  CHECK(p.calls.stores == 0);  // no download for it
  CHECK(max_diff(units_dev, units_cpu) <= 1e-4);
  // and they are not the values after step 3: a snapshot taken now differs by far more
  auto later = p.dev.snapshot_share();
  double moved = max_diff(take(later), units_dev);
  MESSAGE("the units moved by up to " << moved << " in step 3");
  CHECK(moved > 1e-3);
  CHECK(p.calls.overlapping == 0);
}

TEST_CASE("a second device snapshot waits until the first one's units are let go, and a dropped one frees the way") {
  Pair p;
  p.step(0);
  p.commit(0);
  auto first = p.dev.snapshot_share();
  REQUIRE(first.ok());
  p.step(1);
  p.commit(1);
  // the next snapshot is asked for before the writer took the first one: it waits
  Asker asker(p.dev);
  CHECK(asker.still_waiting());
  auto units_first = take(first);  // the writer takes the first: the second goes ahead
  auto second = asker.answer();
  auto units_second = take(second);
  auto now = p.cpu.snapshot_share();  // the CPU Trainer after commit 1, as the second should be
  CHECK(max_diff(units_second, take(now)) <= 1e-4);
  CHECK(max_diff(units_second, units_first) > 1e-3);
  CHECK(p.calls.begun == 2);
  CHECK(p.calls.finished == 2);
  CHECK(p.calls.overlapping == 0);

  // one dropped without being taken still ends its snapshot
  {
    auto dropped = p.dev.snapshot_share();
    REQUIRE(dropped.ok());
  }
  CHECK(p.calls.finished == 3);
  auto next = p.dev.snapshot_share();  // does not wait
  take(next);
  CHECK(p.calls.overlapping == 0);
}

TEST_CASE("with two staging slots a snapshot goes ahead while the last one's units are still being written") {
  Pair p(2);
  p.step(0);
  p.commit(0);
  auto first = p.dev.snapshot_share();
  REQUIRE(first.ok());
  auto held = (*first)();  // the writer has the first one's units and is writing them: the views are held
  REQUIRE(held.ok());
  p.step(1);
  p.commit(1);
  auto second = p.dev.snapshot_share();  // the second slot: no wait
  REQUIRE(second.ok());
  CHECK(p.calls.begun == 2);
  p.step(2);
  p.commit(2);
  // a third waits for a slot, until the first one's units are let go
  Asker asker(p.dev);
  CHECK(asker.still_waiting());
  auto units_first = model::copy_units(*held);
  held->keep.reset();  // written
  auto third = asker.answer();
  auto units_second = take(second), units_third = take(third);
  CHECK(max_diff(units_first, units_second) > 1e-3);  // each the state after its own commit
  CHECK(max_diff(units_second, units_third) > 1e-3);
  auto now = p.cpu.snapshot_share();  // the CPU Trainer after commit 2, as the third should be
  CHECK(max_diff(units_third, take(now)) <= 1e-4);
  CHECK(p.calls.begun == 3);
  CHECK(p.calls.overlapping == 0);
}

TEST_CASE("a failed device copy is a failed snapshot with its reason, and the next snapshot works") {
  Pair p;
  p.step(0);
  p.commit(0);
  std::string dir = std::filesystem::temp_directory_path().string() + "/sal-trainer-snap-" + std::to_string(getpid());
  std::promise<wire::SaveDone> done_p;
  auto done_f = done_p.get_future();
  {
    ckpt::SnapshotWriter writer([&done_p](wire::SaveDone d) { done_p.set_value(std::move(d)); });
    // the copy fails on the device: the writer reports it
    p.calls.fail_finish = "cudaEventSynchronize: an illegal memory access was encountered";
    auto units = p.dev.snapshot_share();
    REQUIRE(units.ok());
    wire::SaveDone reply;
    reply.step = 1, reply.snapshot = true;
    writer.write(dir + "/1", 1, std::move(*units), reply);
    REQUIRE(done_f.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  }
  wire::SaveDone d = done_f.get();
  CHECK_FALSE(d.ok);
  CHECK(d.units == 0);
  CHECK(d.detail.find("snapshot of step 1") != std::string::npos);
  CHECK(d.detail.find("an illegal memory access") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir + "/1"));

  // starting the copy fails: snapshot_share says so, and nothing stays in flight
  p.calls.fail_begin = "cudaMemcpyAsync (snapshot to pinned memory): out of memory";
  auto refused = p.dev.snapshot_share();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("snapshot on cuda:0") != std::string::npos);
  CHECK(refused.error().message().find("out of memory") != std::string::npos);

  // the next one is written, and reads back as the CPU Trainer's units
  std::promise<wire::SaveDone> ok_p;
  auto ok_f = ok_p.get_future();
  {
    ckpt::SnapshotWriter writer([&ok_p](wire::SaveDone d) { ok_p.set_value(std::move(d)); });
    auto units = p.dev.snapshot_share();
    REQUIRE(units.ok());
    wire::SaveDone reply;
    reply.step = 1, reply.snapshot = true;
    writer.write(dir + "/1", 1, std::move(*units), reply);
  }
  wire::SaveDone good = ok_f.get();
  CHECK(good.ok);
  CHECK(good.units == 1 + 2 * 2 + 2 * 4);
  auto cpu_units = p.cpu.snapshot_share();
  for (const auto& u : take(cpu_units)) {
    uint64_t step = 0;
    auto back = ckpt::read_unit(ckpt::unit_file(dir + "/1", u.id), spec("cpu:0").dims, &step);
    REQUIRE(back.ok());
    CHECK(step == 1);
    check_close(*back, u, 1e-4);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a device snapshot taken after its Trainer is gone fails instead of reaching the closed device") {
  Store store;
  zmq::context_t zmq(1);
  Calls calls;
  auto dev = std::make_unique<Trainer>(zmq, spec("cuda:0"), stand_in(calls));
  REQUIRE(dev->init().ok());
  REQUIRE(dev->apply_plan(plan_update(1, 0, store.endpoint)).ok());
  auto units = dev->snapshot_share();
  REQUIRE(units.ok());
  dev.reset();
  auto r = (*units)();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("closed its device") != std::string::npos);
  CHECK(calls.finished == 0);
}

TEST_CASE("a device data plane needs two or more ranks, every one with a GPU no other rank uses") {
  CHECK(all_own_devices({"a", "b"}));
  CHECK(all_own_devices({"a", "b", "c", "d"}));
  CHECK_FALSE(all_own_devices({}));
  CHECK_FALSE(all_own_devices({"a"}));          // one rank: nothing to connect
  CHECK_FALSE(all_own_devices({"a", ""}));      // a CPU rank (or one told SAL_DEVICE_PLANE=host)
  CHECK_FALSE(all_own_devices({"", ""}));
  CHECK_FALSE(all_own_devices({"a", "b", "a"}));  // two ranks on one GPU
}

TEST_CASE("the controller's abort reaches a device Trainer's device, and clearing it reaches it too") {
  zmq::context_t zmq(1);
  Calls calls;
  Trainer t(zmq, spec("cuda:0"), stand_in(calls));
  REQUIRE(t.init().ok());
  CHECK(calls.snapshots == 1);  // the default: the job takes snapshots
  t.abort("drill");
  CHECK(calls.aborts == 1);
  t.clear_abort();
  CHECK(calls.clears == 1);
}

TEST_CASE("a job without snapshots opens its device saying so, so no snapshot memory is reserved") {
  zmq::context_t zmq(1);
  Calls calls;
  TrainSpec s = spec("cuda:0");
  s.snapshots = false;
  Trainer t(zmq, s, stand_in(calls));
  REQUIRE(t.init().ok());
  CHECK(calls.snapshots == 0);
}
