// standby_plane.h — a grouped plan's second plane over all of its ranks, connected and warmed in
// the background, for SPARe's patch (trainer_groups.cpp) to narrow to the ranks left after a loss
// (comm::Collectives::narrow) instead of connecting a plane of its own inside the patched step.
//
// Why: a patch's own plane connected while its ranks computed, but its first calls were on a plane
// nobody had used: the peers' shared-memory queues and descriptors attached and faulted in, page by
// page, under each worker's spent CPU quota (docs/performance.md: 85-130 ms for the patched step's
// synchronisation against about 30 on a used plane). The standby's connect, its first call (one
// allreduce, which reaches every peer) and its pages mapped in bulk are paid while the plan trains,
// on a thread of lower priority, so the patch finds a plane as warm as the plan's own.
//
// Its thread has a store client of its own: the plan's is one call at a time, and the standby's
// rendezvous must neither hold it nor be stopped by an interruption meant for the step. Stopping
// never waits: stop() interrupts the rendezvous, aborts a plane already connected (its peers' waits
// fail at once), and the thread is joined later (reap(), or the destructor). A plane the patch
// cannot have — still connecting, failed, stopped — is simply not offered: take() returns null
// and the patch connects a plane of its own, as before.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/collectives.h"
#include "comm/store_client.h"

namespace sal::runtime {

class StandbyPlane {
 public:
  // Starts connecting rank o.rank of o.size under o.prefix through `store` (a client of its own),
  // then warms the plane with one allreduce of `warm_floats` floats.
  StandbyPlane(comm::GlooOptions o, std::unique_ptr<comm::StoreClient> store, size_t warm_floats);
  ~StandbyPlane();  // stop(), then joins the thread
  StandbyPlane(const StandbyPlane&) = delete;
  StandbyPlane& operator=(const StandbyPlane&) = delete;

  // Never blocks: the connected, warmed plane (once; null while it is not ready, or when it failed
  // or was stopped or taken).
  std::unique_ptr<comm::Collectives> take();
  // Never blocks for long: the rendezvous fails, a connected plane is aborted; the thread ends soon.
  void stop(const std::string& why);
  bool finished() const { return finished_.load(); }
  // Not stopped, and connecting, warming or warm: a plan that keeps the plans' planes keeps it.
  bool live();

 private:
  void run(comm::GlooOptions o, size_t warm_floats);

  const std::string prefix_;
  std::unique_ptr<comm::StoreClient> store_;
  std::mutex mu_;
  std::unique_ptr<comm::Collectives> plane_;  // connected, not yet taken (under mu_; the thread warms it)
  bool ready_ = false;                         // warmed (under mu_)
  bool stopped_ = false;                       // (under mu_)
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

// A patch's data plane (rank o.rank of o.size, under o.prefix): `standby` narrowed to `members`
// (the patch's ranks as ranks of the standby) where every rank of the patch holds one — agreed in
// one store round under o.prefix/standby/ — else one connected under o.prefix now (a standby
// held, aborted). Every rank of the patch calls it, each with what it holds.
struct PatchPlane {
  std::unique_ptr<comm::Collectives> plane;
  bool standby = false;  // the standby plane, narrowed
};
Result<PatchPlane> patch_plane(const std::vector<int>& members, const comm::GlooOptions& o, comm::StoreClient& store,
                               std::unique_ptr<comm::Collectives> standby);

// Standby planes stopped but whose threads may still run (a rendezvous or a wire-up ending):
// joined once finished, never by the caller of stop().
class StandbyYard {
 public:
  void retire(std::unique_ptr<StandbyPlane> s, const std::string& why);
  void reap();  // joins those that finished
  ~StandbyYard() = default;  // joins every one (the StandbyPlanes' destructors)

 private:
  std::vector<std::unique_ptr<StandbyPlane>> stopped_;
};

}  // namespace sal::runtime
