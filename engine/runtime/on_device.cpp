// on_device.cpp — see on_device.h.
#include "runtime/on_device.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace sal::runtime {

// The device's snapshot slots: `busy` of `slots` from begin_snapshot() until the units are dropped
// (or fail to be taken), on whichever thread. `device` goes null when the OnDevice does, so units
// taken later fail instead of reaching a closed device; `taking` counts the finish_snapshot() calls
// under way, which the OnDevice's end waits for. The mutex is not held while a copy is waited for,
// so the training thread can begin a snapshot in a free slot meanwhile.
struct OnDevice::Gate {
  std::mutex mu;
  std::condition_variable cv;
  int busy = 0, slots = 1, taking = 0;
  DeviceCompute* device = nullptr;

  void give_back() {
    std::lock_guard<std::mutex> lock(mu);
    --busy;
    cv.notify_all();
  }
};

// A begun device snapshot: taking its units (once) waits for the device's copy; the units' keep
// gives the slot back when dropped. Dropped untaken, it still ends the snapshot, so a next one is
// not kept waiting forever.
class OnDevice::Pending {
 public:
  Pending(std::shared_ptr<OnDevice::Gate> gate, uint64_t ticket) : gate_(std::move(gate)), ticket_(ticket) {}
  ~Pending() {
    if (!taken_) (void)take();
  }
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;

  Result<model::UnitViews> take() {
    DeviceCompute* device = nullptr;
    {
      std::lock_guard<std::mutex> lock(gate_->mu);
      if (taken_) return fail("this snapshot's units were already taken");
      taken_ = true;
      device = gate_->device;
      if (device) ++gate_->taking;
    }
    if (!device) {
      gate_->give_back();
      return fail("the worker closed its device before the snapshot's copy was taken");
    }
    auto units = device->finish_snapshot(ticket_);
    {
      std::lock_guard<std::mutex> lock(gate_->mu);
      --gate_->taking;
      gate_->cv.notify_all();
    }
    if (!units) {
      gate_->give_back();
      return units;
    }
    // The device's staging first, then the slot: a snapshot begun after give_back() finds it free.
    struct Lend {
      std::shared_ptr<const void> staging;
      std::shared_ptr<OnDevice::Gate> gate;
      ~Lend() {
        staging.reset();
        gate->give_back();
      }
    };
    units->keep = std::shared_ptr<const Lend>(new Lend{std::move(units->keep), gate_});
    return units;
  }

 private:
  std::shared_ptr<OnDevice::Gate> gate_;
  uint64_t ticket_;
  bool taken_ = false;  // under gate_->mu
};

OnDevice::OnDevice(std::unique_ptr<DeviceCompute> device, model::Params& host, std::string name)
    : device_(std::move(device)), host_(host), name_(std::move(name)), gate_(std::make_shared<Gate>()) {
  gate_->device = device_.get();
  gate_->slots = std::max(1, device_->snapshot_slots());
}

// A snapshot's units taken from now on fail; those being taken finish first.
OnDevice::~OnDevice() {
  std::unique_lock<std::mutex> lock(gate_->mu);
  gate_->device = nullptr;
  gate_->cv.wait(lock, [this] { return gate_->taking == 0; });
}

// The device's gradients belong to the parameters about to be replaced, and its exchange refers to
// the Collectives the Trainer is about to replace: it lets go of them.
Status OnDevice::release() { return device_->set_plan({}); }

Status OnDevice::to_host() {
  if (!newer_) return {};
  if (auto s = device_->store(host_); !s) return s.error().with_context("bringing the host parameters up to date");
  newer_ = false;
  return {};
}

// The others stay newer on the device: a later to_host() brings them.
Status OnDevice::to_host(const std::vector<model::UnitId>& ids) {
  if (!newer_ || ids.empty()) return {};
  if (auto s = device_->store_units(host_, ids); !s)
    return s.error().with_context("bringing the units sent away up to date on the host");
  return {};
}

bool OnDevice::holds(const HeldExperts& held) const {
  return !held_.empty() && std::set<std::pair<int, int>>(held.begin(), held.end()) == held_;
}

Status OnDevice::load(const HeldExperts& held) {
  held_.clear();
  SAL_TRY(device_->load(host_, held));
  held_ = std::set<std::pair<int, int>>(held.begin(), held.end());
  return {};
}

// A failed move leaves the host copies of the units kept behind the device's: what the device
// still holds comes down, so that the next plan can load everything from the host.
Status OnDevice::move_experts(const HeldExperts& held) {
  if (held_.empty()) return load(held);  // nothing on the device to keep
  held_.clear();
  if (auto s = device_->move_experts(host_, held); !s) {
    if (auto back = device_->store(host_); back)
      newer_ = false;
    else
      spdlog::error("{}: after a failed move of experts, the device's units could not be brought back to the host "
                    "either (the next plan loads the host's, which may be behind): {}", name_, back.error().message());
    return s.error().with_context("moving experts on " + name_);
  }
  held_ = std::set<std::pair<int, int>>(held.begin(), held.end());
  return {};
}

Status OnDevice::refresh_units(const std::vector<model::UnitId>& ids) {
  if (auto s = device_->upload_units(host_, ids); !s) return s.error().with_context("refreshing units on " + name_);
  return {};
}

Status OnDevice::set_plan(const DevicePlan& plan) { return device_->set_plan(plan); }

Result<model::StepStats> OnDevice::step(const model::Batch& b, int64_t global_tokens) {
  return device_->step(b, global_tokens);
}

Status OnDevice::update(double lr, double grad_scale, int64_t t) {
  newer_ = true;  // even a failed update may have changed some units
  if (auto s = device_->update(lr, grad_scale, t); !s) return s.error().with_context("update on " + name_);
  return {};
}

// The host Params are not involved (nor brought up to date): only the unit ids come from them,
// and the device holds the same units (load() put them there).
Result<ckpt::SnapshotUnits> OnDevice::snapshot(const std::vector<const model::Unit*>& units) {
  std::vector<model::UnitId> ids;
  for (const model::Unit* u : units) ids.push_back(u->id);
  return copy(ids);
}

Result<ckpt::SnapshotUnits> OnDevice::copy(const std::vector<model::UnitId>& ids) {
  {
    std::unique_lock<std::mutex> lock(gate_->mu);
    gate_->cv.wait(lock, [this] { return gate_->busy < gate_->slots; });
    ++gate_->busy;
  }
  auto ticket = device_->begin_snapshot(ids);
  if (!ticket) {
    gate_->give_back();
    return ticket.error().with_context("snapshot on " + name_);
  }
  auto pending = std::make_shared<Pending>(gate_, *ticket);
  return ckpt::SnapshotUnits([pending] { return pending->take(); });
}

// The slot's units copied off the device on its copy stream (after a dense snapshot's copy, if one
// is in flight), the snapshot thread waiting for them.
void OnDevice::put_slot(SparseSnapshots& sparse, uint64_t step, double grad_norm, const ModelShape& shape,
                        std::vector<const model::Unit*> written) {
  std::vector<UnitId> ids;
  for (const model::Unit* u : written) ids.push_back(u->id);
  ids = sparse.slot_units(step, shape, ids);
  if (ids.empty()) return;
  auto copied = copy(ids);
  if (!copied) return spdlog::warn("the sparse snapshot slot of step {}: {}", step, copied.error().message());
  sparse.after_commit_copied(step, grad_norm, shape, std::move(*copied));
}

}  // namespace sal::runtime
