// controller_driver.cpp — the controller's side of the job driver (see controller.h): it starts the
// rendezvous store and the run's records, feeds the driver one event at a time (an event that
// arrives while another is handled — the planner services the mesh while a policy decides — waits
// its turn), and applies each action the driver answers with. A record the journal must hold
// durably (a commit, a rewind, a plan in force) is synced off the loop: the actions after it, and
// the events that arrive meanwhile, wait until it is on disk.
#include <spdlog/spdlog.h>

#include "ckpt/format.h"
#include "comm/store_server.h"
#include "core/clock.h"
#include "core/load_files.h"
#include "core/overloaded.h"
#include "core/paths.h"
#include "mesh/cpu_share.h"
#include "mesh/controller.h"
#include "policy/planner.h"
#include "mesh/security.h"

namespace sal::mesh {
namespace {

// "tcp://10.0.0.5:7000" -> "tcp://10.0.0.5:*"; other transports get a loopback port.
std::string store_bind(const std::string& mesh_endpoint) {
  auto colon = mesh_endpoint.rfind(':');
  if (mesh_endpoint.rfind("tcp://", 0) == 0 && colon != std::string::npos && colon > 5)
    return mesh_endpoint.substr(0, colon) + ":*";
  return "tcp://127.0.0.1:*";
}

// A checkpoint's manifest: its step and units, the job's model shape and token format.
Status write_job_manifest(const std::string& dir, uint64_t step, size_t units, const job::JobConfig& job) {
  return ckpt::write_manifest(dir, step, units, job::model_dims(job.model), job.data.format);
}

}  // namespace

// The rendezvous store (bound on the mesh endpoint's host), metrics.csv and the run record; the
// driver is gathering.
Status Controller::start_training() {
  std::string bind = store_bind(mesh_endpoint_);
  store_ = std::make_unique<comm::StoreServer>(ctx_, bind,
                                               comm::StoreServerOptions{{}, store_server_hook(bind, server_key_.get())});
  auto ep = store_->start();
  if (!ep) return ep.error().with_context("rendezvous store");
  store_endpoint_ = *ep;
  if (!opts_.run_dir.empty()) {
    bool resumed = opts_.resume.has_value();
    auto resume_at = resumed ? std::optional<uint64_t>(opts_.resume->committed) : std::nullopt;
    SAL_TRY(step_log_.open_csv(opts_.run_dir + "/metrics.csv", resume_at));
    SAL_TRY(record_.open(opts_.run_dir, resumed));
    if (resumed) record_.carry(opts_.resume->recoveries, opts_.resume->lost_steps, opts_.resume->restores);
    SAL_TRY(open_journal());
  }
  record_.phase("wait", now_s());
  return {};
}

void Controller::record_routing(uint64_t step, const std::vector<uint64_t>& counts) {
  const size_t E = size_t(opts_.job.model.experts);
  if (opts_.run_dir.empty() || routing_failed_ || E == 0) return;
  std::string text;
  for (size_t l = 0; l * E < counts.size(); ++l)
    text += trace_line_of(l, std::vector<uint64_t>(counts.begin() + long(l * E), counts.begin() + long((l + 1) * E))) + "\n";
  const std::string dir = opts_.run_dir + "/routing";
  auto s = make_dirs(dir);
  if (s) s = write_file(dir + "/table_iter" + std::to_string(step) + ".log", text);
  if (!s) {
    routing_failed_ = true;
    spdlog::warn("train.record_routing: {} (no more routing is recorded this run)", s.error().message());
  }
}

Status Controller::open_journal() {
  std::string path = opts_.run_dir + "/journal.jsonl";
  if (opts_.resume) {
    auto f = JournalFile::reopen(path, *opts_.resume);
    if (!f) return f.error().with_context("resuming");
    journal_ = std::move(*f);
    events_.add("controller_resumed", kNoNode, membership_.epoch(),
                "from " + path + " (" + std::to_string(opts_.resume->records) + " records read in " +
                    fmt::format("{:.1f}", opts_.resume->read_ms) + " ms): " + std::to_string(opts_.resume->committed) +
                    " steps committed" +
                    (opts_.resume->plan ? ", plan " + std::to_string(opts_.resume->plan->number()) + " in force" : ""));
    return {};
  }
  job::rec::Job header{opts_.job.name, opts_.job.file, opts_.job.dir, opts_.job.text, mesh_endpoint_, opts_.max_steps,
                       wall_ms() - (mono_ns() - started_ns_) / 1'000'000};
  auto f = JournalFile::create(path, header);
  if (!f) return f.error();
  journal_ = std::move(*f);
  return {};
}

void Controller::journal(const job::Record& r, bool sync) {
  if (!journal_) return;
  Status s = journal_->append(r, false);
  if (s && sync)
    s = journal_syncer_.start(*journal_, [this](const Status& st, double ms) { journal_synced(st, ms); });
  if (!s) {
    uint64_t suppressed = 0;
    if (bad_input_log_.allow("journal", mono_ns(), suppressed))
      spdlog::error("journal: {}{}", s.error().message(), KindLog::more(suppressed));
  }
}

Status Controller::journal_now(const job::Record& r) {
  if (!journal_) return {};
  return journal_->append(r, true);
}

double Controller::now_s() const { return double(mono_ns() - started_ns_) / 1e9; }

void Controller::request_plan(const std::string& why, bool use_loads) { feed(job::in::PlanRequest{why, use_loads}); }

// Membership changed (a message, a loss, an operator's drain): the driver sees the new view, the
// attachments the new state.
void Controller::changed() {
  if (!stopping_) view_changed();
  state_changed();
  if (on_change) on_change();
}

// Whether a node's workers run in CPU cgroups of their own (--cpu-share; only seen on this host).
// Each process is looked at once: the view is built at every mesh message.
bool Controller::confined(const Node& n) {
  static const std::string here = hostname();
  if (n.host != here) return false;
  for (const auto& w : n.workers) {
    if (w.pid <= 0 || w.exited) continue;
    auto [it, fresh] = confined_pids_.try_emplace(uint64_t(w.pid), false);
    if (fresh) it->second = confined_group(pid_t(w.pid)).ok();
    if (it->second) return true;
  }
  return false;
}

// The membership the driver sees, when it changed.
void Controller::view_changed() {
  if (membership_.epoch() != journaled_epoch_) {
    journaled_epoch_ = membership_.epoch();
    journal(job::rec::EpochReached{journaled_epoch_});
  }
  job::View v{membership_.epoch(), membership_.ready_participants(), membership_.start_failure(), {}, {}};
  for (const auto& [id, n] : membership_.nodes()) {
    if (n.live() && !n.slice_endpoint.empty()) v.slices[id] = wire::SliceNode{uint32_t(id), n.slice_endpoint, n.slice_key};
    if (auto r = rack_of_name_.find(n.name); n.live() && r != rack_of_name_.end()) v.racks[id] = r->second;
    if (n.live() && !confined(n)) v.cpu_pools[id] = n.host;
  }
  if (driver_->wants_holdings()) {
    // a resumed job reconciles with what each worker holds: only workers that have said so count
    v.held = holdings();
    std::erase_if(v.ready, [&](const Participant& p) { return !v.held.count(p); });
  }
  if (v == last_view_) return;
  last_view_ = v;
  feed(job::in::Membership{std::move(v)});
}

std::map<Participant, job::Holding> Controller::holdings() const {
  std::map<Participant, job::Holding> out;
  for (const auto& [id, n] : membership_.nodes())
    for (const auto& w : n.workers) {
      if (!w.held_known) continue;
      job::Holding h{w.held.plan, w.held.steps, std::nullopt, w.held.pending_epoch};
      if (w.held.pending >= 0) h.pending = uint64_t(w.held.pending);
      out[{id, w.index}] = h;
    }
  return out;
}

void Controller::feed(job::Event e) {
  inbox_.push_back({mono_ns(), std::move(e)});
  drain();
}

void Controller::drain() {
  if (feeding_ || journal_syncer_.busy()) return;
  feeding_ = true;
  while (!inbox_.empty() && !journal_syncer_.busy()) {
    job::Input in = std::move(inbox_.front());
    inbox_.pop_front();
    if (spdlog::should_log(spdlog::level::debug))
      spdlog::debug("driver ({}): {}", job::phase_name(driver_->phase()), job::describe(in.what));
    apply_all(driver_->handle(in));
  }
  feeding_ = false;
  state_changed();
}

void Controller::apply_all(std::vector<job::Action> actions) {
  const bool trace = spdlog::should_log(spdlog::level::debug);
  for (size_t i = 0; i < actions.size(); ++i) {
    if (trace) spdlog::debug("  -> {}", job::describe(actions[i]));
    apply(actions[i]);
    if (journal_syncer_.busy()) {
      after_sync_.assign(std::make_move_iterator(actions.begin() + long(i) + 1), std::make_move_iterator(actions.end()));
      return;
    }
  }
}

// The durable record is on disk (or could not be made so, which is logged): what the driver said
// to do after it goes ahead, then the events that waited.
void Controller::journal_synced(const Status& s, double ms) {
  if (!s) spdlog::error("journal: {}", s.error().message());
  if (ms > 100) spdlog::warn("journal: a sync took {:.0f} ms (the mesh and the REPL were served meanwhile)", ms);
  feeding_ = true;
  apply_all(std::exchange(after_sync_, {}));
  feeding_ = false;
  drain();
}

void Controller::apply(const job::Action& action) {
  namespace act = job::act;
  std::visit(Overloaded{
                 [&](const act::Send& a) { apply_send(a); },
                 [&](const act::DecidePlan& a) { apply_decide(a); },
                 [&](const act::DecidePatch& a) {
                   std::string by;
                   auto stacks = planner_->patch_stacks(a.alive, a.current, by);
                   feed(job::in::PatchDecided{a.decision, std::move(stacks), std::move(by)});
                 },
                 [&](const act::DecideHealth& a) {
                   std::string by;
                   auto proposal = planner_->health(a.input, by);
                   feed(job::in::HealthDecided{a.decision, std::move(proposal), std::move(by)});
                 },
                 [&](const act::Drain& a) {
                   if (auto s = drain_node(a.node, "the health policy"); !s)
                     spdlog::warn("the health policy's drain of node {}: {}", a.node, s.error().message());
                 },
                 [&](const act::ArmTimer& a) { apply_timer(a.timer, a.ms); },
                 [&](const act::CancelTimer& a) { apply_timer(a.timer, std::nullopt); },
                 [&](const act::Note& a) { apply_note(a); },
                 [&](const act::Phase& a) { a.name.empty() ? record_.close(now_s()) : record_.phase(a.name, now_s(), a.detail); },
                 [&](const act::StepDone& a) {
                   step_log_.add(a.record);
                   if (!a.routing.empty()) record_routing(a.record.step, a.routing);
                 },
                 [&](const act::PlanInForce& a) {
                   record_.plan(a.plan, now_s(), a.loads);
                   if (on_change) on_change();
                 },
                 [&](const act::RecoveryDone& a) {
                   record_.recovery(a.record);
                   journal(job::rec::Recovery{a.record});
                   tell([&](Attachment& x) { x.recovery(a.record.seconds, a.record.capacity_wait_s); });
                 },
                 [&](const act::StepsLost& a) {
                   record_.lost(a.steps);
                   journal(job::rec::Lost{a.steps});
                 },
                 [&](const act::Restored&) {
                   record_.restored();
                   journal(job::rec::Restores{1});
                 },
                 [&](const act::EraseKeys& a) {
                   std::string prefix = wire::plan_keys(a.plan) + "/";
                   if (!a.under.empty()) prefix += a.under + "/";
                   a.closed ? store_->close_prefix(prefix) : store_->erase_prefix(prefix);
                   if (a.closed && a.under.empty()) store_->close_prefix(wire::standby_keys(a.plan) + "/");
                 },
                 [&](const act::SnapshotComplete& a) {
                   // the marker, and a manifest as a final checkpoint has: `sample` and `run --resume` take it
                   if (auto s = ckpt::mark_complete(a.snapshot); !s) spdlog::warn("{}", s.error().message());
                   const auto& snap = a.snapshot;
                   if (auto s = write_job_manifest(snap.dir, snap.step, snap.units, opts_.job); !s)
                     spdlog::warn("{}", s.error().message());
                   tell([&](Attachment& x) { x.snapshot_complete(snap.step); });
                 },
                 [&](const act::CheckpointComplete& a) {
                   if (auto s = write_job_manifest(a.dir, a.step, a.units, opts_.job); !s)
                     spdlog::error("the final checkpoint has no manifest: {}", s.error().message());
                 },
                 [&](const act::SnapshotDrop& a) {
                   if (auto s = ckpt::remove_snapshot(a.dir); !s) spdlog::warn("{}", s.error().message());
                 },
                 [&](const act::Committed& a) {
                   if (on_committed) on_committed(a.step);
                 },
                 [&](const act::StopJob& a) { stop_now(a.why); },
                 [&](const act::Journal& a) { journal(a.record, a.sync); },
             },
             action);
}

// To the nodes still reachable; a plan update learns the rendezvous store first (and a drill
// may arm a fault in a worker that moves state).
void Controller::apply_send(const job::act::Send& s) {
  job::act::Message msg = s.msg;
  if (auto* u = std::get_if<wire::PlanUpdate>(&msg)) {
    u->store = store_endpoint_;
    if (on_plan_sending) on_plan_sending(*u);
  }
  auto reachable = [](const Node& n) { return n.live() || n.state == NodeState::draining; };
  std::visit(
      [&](const auto& m) {
        if (s.all) return broadcast(m);
        for (NodeId id : s.to)
          if (const Node* n = membership_.find(id); n && reachable(*n)) send_to(n->routing_id, m);
      },
      msg);
}

// The policies may take a while (the mesh is serviced meanwhile; what arrives then waits in the
// inbox); the answer is the driver's next event.
void Controller::apply_decide(const job::act::DecidePlan& d) {
  auto r = planner_->decide(d);
  if (r) tell([&](Attachment& x) { x.plan_decided(r->ms); });
  feed(job::in::Decided{d.decision, std::move(r)});
}

void Controller::apply_note(const job::act::Note& n) {
  if (!n.kind.empty()) events_.add(n.kind, n.node, membership_.epoch(), n.detail);
  if (n.quiet) return;
  switch (n.level) {
    case job::act::Level::info: return spdlog::info("{}", n.detail);
    case job::act::Level::warn: return spdlog::warn("{}", n.detail);
    case job::act::Level::error: return spdlog::error("{}", n.detail);
  }
}

void Controller::apply_timer(job::Timer t, std::optional<uint64_t> ms) {
  Timer& timer = *driver_timers_[size_t(t)];
  if (!ms) return timer.stop();
  timer.start(*ms, 0, [this, t] { feed(job::in::TimerFired{t}); });
}

}  // namespace sal::mesh
