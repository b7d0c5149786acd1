// test_sparse.cpp — MoEtion's sparse snapshots in one process: a tiny model trains with a slot
// taken after every iteration as a 4-iteration schedule says; everything is then lost after
// iteration 9, the newest complete window (iterations 4..7) is loaded and replayed with the
// not-yet-complete operators frozen, the steps after it are run again, and the weights and moments
// equal those of the run that never failed, bit for bit. Replaying with the norm the frozen step
// computes itself (not the recorded one) does not; a corrupt copy is found by its checksum. A
// node's slice store keeps each writer's newest complete window within a budget.
#include <doctest/doctest.h>

#include <cmath>

#include "ckpt/slice_frames.h"
#include "ckpt/slice_store.h"
#include "ckpt/sparse.h"
#include "model/local_exchange.h"
#include "model/moe_gpt.h"
#include "model/optimizer.h"

using namespace sal;
using namespace sal::model;
using namespace sal::ckpt;

namespace {

constexpr int kBatch = 3;

Dims tiny() {
  Dims d;
  d.layers = 2, d.d = 8, d.heads = 2, d.experts = 4, d.top_k = 2, d.seq_len = 5, d.vocab = 11, d.aux_weight = 0.05f;
  return d;
}

Corpus corpus(int vocab) {
  std::vector<uint32_t> t(400);
  for (size_t i = 0; i < t.size(); ++i) t[i] = uint32_t((i * 7 + i / 3) % size_t(vocab));
  return Corpus::from_tokens(std::move(t), "pattern");
}

double grad_norm(Params& p) {
  double n2 = 0;
  for (Unit* u : p.units()) n2 += grad_sum_squares(*u);
  return std::sqrt(n2);
}

// Iteration `step`: forward and backward on its batch, then AdamW clipped with `norm` (or, when
// negative, with the norm this step computes). Returns the computed norm.
double train_step(Params& p, const Corpus& c, uint64_t step, double norm = -1) {
  Batch b = make_batch(c, 5, step, 0, kBatch, p.dims.seq_len);
  LocalExchange ex(p);
  MoeGpt m(p);
  p.zero_grads();
  auto s = m.step(b, int64_t(kBatch) * p.dims.seq_len, ex);
  REQUIRE(s.ok());
  OptimConfig oc;
  oc.lr = 1e-2, oc.warmup = 2, oc.total_steps = 40, oc.clip = 0.5;  // clipping bites: the norm matters
  double own = grad_norm(p);
  apply_adamw(p, oc, learning_rate(oc, int64_t(step)), clip_scale(oc, norm < 0 ? own : norm), int64_t(step) + 1);
  return own;
}

// A 4-iteration window over the 13 units of tiny(), not in index order (as a popularity order is not).
plan::CheckpointSchedule schedule() {
  return {4, 4, {{5, 12, 0}, {7, 1, 9}, {2, 11, 4, 8}, {10, 3, 6}}};
}

SparseSlot slot_after(uint64_t step, double norm, Params& p) {
  auto units = p.units();
  return take_slot(schedule(), *slot_of(schedule(), step), step, norm, p.dims,
                   std::vector<const Unit*>(units.begin(), units.end()));
}

bool same_state(Params& a, Params& b) {
  auto ua = a.units(), ub = b.units();
  if (ua.size() != ub.size()) return false;
  for (size_t i = 0; i < ua.size(); ++i)
    if (ua[i]->w != ub[i]->w || ua[i]->m != ub[i]->m || ua[i]->v != ub[i]->v) return false;
  return true;
}

struct Trained {
  Params reference;          // after iterations 0..11, never failed
  SparseWindows windows{schedule()};
};

// Iterations 0..11 with a slot after each; the holder has the slots the run had taken after
// iteration 9 (the failure point).
Trained train(const Corpus& c) {
  Trained t{Params::create(tiny(), 3, Params::all_experts(tiny()))};
  for (uint64_t step = 0; step < 12; ++step) {
    double norm = train_step(t.reference, c, step);
    if (step > 9) continue;
    t.windows.add(slot_after(step, norm, t.reference));  // every iteration takes a slot: period == window
  }
  return t;
}

}  // namespace

TEST_CASE("a window of sparse snapshots replays to the dense state, bit for bit, and the run goes on as if it never failed") {
  Corpus c = corpus(tiny().vocab);
  Trained t = train(c);
  auto window = t.windows.latest_complete();
  REQUIRE(window.size() == 4);
  CHECK(window.front()->step == 4);  // iterations 8 and 9 are a window not yet complete
  CHECK(window.back()->step == 7);
  // every unit in full once, and the frozen ones' weights in the slots before
  CHECK(window[0]->units.size() == 13);
  CHECK(window[3]->units.size() == 3);
  // slot 0: its three operators in full (weights and moments), the ten later ones' weights only
  size_t full = 0;
  for (const auto& [id, copy] : window[0]->units) {
    full += copy.full;
    CHECK(copy.bytes() == unit_size(tiny(), id.kind) * sizeof(float) * (copy.full ? 3 : 1));
  }
  CHECK(full == 3);

  // everything lost: a fresh model (other weights), restored from the window and replayed
  Params p = Params::create(tiny(), 99, Params::all_experts(tiny()));
  auto replay = replay_window(window, p, [&](uint64_t step, double norm) -> Status {
    train_step(p, c, step, norm);
    return {};
  });
  REQUIRE_MESSAGE(replay.ok(), (replay.ok() ? "" : replay.error().message()));
  CHECK(replay->from_step == 4);
  CHECK(replay->to_step == 7);
  // 13 units: 10 frozen in the first replayed iteration, 7, then 3
  CHECK(replay->frozen == std::vector<size_t>{10, 7, 3});
  for (Unit* u : p.units()) CHECK_FALSE(u->frozen);
  for (uint64_t step = 8; step < 12; ++step) train_step(p, c, step);  // re-executed to the failure and on
  CHECK(same_state(p, t.reference));
}

TEST_CASE("replaying with the norm a frozen step computes, not the recorded one, gives other weights") {
  Corpus c = corpus(tiny().vocab);
  Trained t = train(c);
  Params p = Params::create(tiny(), 99, Params::all_experts(tiny()));
  auto replay = replay_window(t.windows.latest_complete(), p, [&](uint64_t step, double) -> Status {
    train_step(p, c, step);  // frozen units add no gradient: a smaller norm, a different clip
    return {};
  });
  REQUIRE(replay.ok());
  for (uint64_t step = 8; step < 12; ++step) train_step(p, c, step);
  CHECK_FALSE(same_state(p, t.reference));
}

TEST_CASE("a corrupt copy is found by its checksum and named, and a window that misses a unit is refused") {
  Corpus c = corpus(tiny().vocab);
  Trained t = train(c);
  UnitCopy* copy = t.windows.find(5, UnitId{UnitKind::expert, 0, 3});
  REQUIRE(copy != nullptr);
  const float was = copy->w[2];
  copy->w[2] = std::nextafter(was, 1.0f);  // one bit of one float
  Params p = Params::create(tiny(), 99, Params::all_experts(tiny()));
  auto replay = replay_window(t.windows.latest_complete(), p, [&](uint64_t step, double norm) -> Status {
    train_step(p, c, step, norm);
    return {};
  });
  REQUIRE_FALSE(replay.ok());
  CHECK(replay.error().message() == "layer0.expert3 in the snapshot of iteration 5: checksum mismatch (the copy is corrupt)");
  for (Unit* u : p.units()) CHECK_FALSE(u->frozen);
  copy->w[2] = was;

  auto window = t.windows.latest_complete();
  window.pop_back();  // the last slot's operators are nowhere in full
  Params q = Params::create(tiny(), 99, Params::all_experts(tiny()));
  auto missing = replay_window(window, q, [&](uint64_t, double) -> Status { return {}; });
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find(": not in full in the window of iterations 4..6") != std::string::npos);
}

TEST_CASE("a slot of the state's own step loads only the units asked for, the others left as they are") {
  Corpus c = corpus(tiny().vocab);
  Params ref = Params::create(tiny(), 3, Params::all_experts(tiny()));
  double norm = 0;
  for (uint64_t step = 0; step < 6; ++step) norm = train_step(ref, c, step);
  plan::CheckpointSchedule one{1, 1, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}};  // every unit in full
  auto units = ref.units();
  SparseSlot slot =
      take_slot(one, *slot_of(one, 5), 5, norm, ref.dims, std::vector<const Unit*>(units.begin(), units.end()));
  // a survivor: the state of step 5 but for two experts it did not hold (another's weights there)
  Params p = ref;
  Params other = Params::create(tiny(), 99, Params::all_experts(tiny()));
  const UnitId e1{UnitKind::expert, 0, 1}, e2{UnitKind::expert, 1, 2};
  *p.unit(e1) = *other.unit(e1), *p.unit(e2) = *other.unit(e2);
  REQUIRE_FALSE(same_state(p, ref));
  REQUIRE(load_from_slot(slot, p, {e1, e2}).ok());
  CHECK(same_state(p, ref));
  // a unit kept as it is is not overwritten: asked for one, the other stays another's
  *p.unit(e2) = *other.unit(e2);
  REQUIRE(load_from_slot(slot, p, {e1}).ok());
  CHECK(p.unit(e2)->w == other.unit(e2)->w);
  // a corrupt copy, a unit not in full, or one this state does not hold is refused with its name
  slot.units.at(e1).w[0] += 1.0f;
  auto bad = load_from_slot(slot, p, {e1});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("layer0.expert1") != std::string::npos);
  slot.units.erase(e1);
  auto missing = load_from_slot(slot, p, {e1});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message() == "layer0.expert1: not in full in the slot of iteration 5");
  Params few = Params::create(tiny(), 3, {{0, 0}});
  auto not_held = load_from_slot(slot, few, {e2});
  REQUIRE_FALSE(not_held.ok());
  CHECK(not_held.error().message() == "layer1.expert2: not held here, so not loaded from the slot of iteration 5");
}

TEST_CASE("a unit's checksum changes with any one flipped bit, in any lane or tail of its weights and moments") {
  for (size_t floats : {1u, 7u, 8u, 9u, 17u, 33u}) {
    UnitCopy c;
    c.full = true;
    for (auto* v : {&c.w, &c.m, &c.v}) {
      v->resize(floats);
      for (size_t i = 0; i < floats; ++i) (*v)[i] = 0.25f * float(i) - float(v == &c.m);
    }
    const uint64_t sum = unit_checksum(c);
    int unchanged = 0;
    for (auto* v : {&c.w, &c.m, &c.v})
      for (size_t byte = 0; byte < floats * sizeof(float); ++byte)
        for (int bit = 0; bit < 8; ++bit) {
          auto* b = reinterpret_cast<unsigned char*>(v->data()) + byte;
          *b ^= uint8_t(1u << bit);
          unchanged += unit_checksum(c) == sum;
          *b ^= uint8_t(1u << bit);
        }
    CHECK_MESSAGE(unchanged == 0, floats << " floats");
    CHECK(unit_checksum(c) == sum);
  }
}

TEST_CASE("the holder keeps the newest complete window and the one being filled") {
  Corpus c = corpus(tiny().vocab);
  Params p = Params::create(tiny(), 3, Params::all_experts(tiny()));
  SparseWindows w(schedule());
  size_t one_window = 0;
  for (uint64_t step = 0; step < 14; ++step) {
    double norm = train_step(p, c, step);
    w.add(slot_after(step, norm, p));
    if (step == 3) one_window = w.bytes();
    if (step >= 3) CHECK(w.latest_complete().front()->step == step - step % 4 - (step % 4 == 3 ? 0 : 4));
  }
  // after iteration 13: the window of 8..11 and the slots of 12 and 13; 0..7 dropped
  CHECK(w.find(7, UnitId{UnitKind::embedding, -1, -1}) == nullptr);
  CHECK(w.find(8, UnitId{UnitKind::embedding, -1, -1}) != nullptr);
  CHECK(w.bytes() < 2 * one_window);
  plan::CheckpointSchedule dense{1, 5, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}};  // dense every 5
  CHECK(slot_of(dense, 10) == 0u);
  CHECK_FALSE(slot_of(dense, 11).has_value());
}

TEST_CASE("a node's slice store keeps each writer's two newest complete windows within its budget, and refuses damaged or excess slices") {
  Corpus c = corpus(tiny().vocab);
  Params p = Params::create(tiny(), 3, Params::all_experts(tiny()));
  std::vector<SparseSlot> slots;
  for (uint64_t step = 0; step < 8; ++step) slots.push_back(slot_after(step, train_step(p, c, step), p));
  size_t window_bytes = 0;
  for (size_t i = 0; i < 4; ++i) window_bytes += slots[i].bytes();

  const Writer w00{0, 0}, w10{1, 0};
  SliceStore store(3 * window_bytes + slots[4].bytes() / 2);  // three windows, not a slot more
  for (size_t i = 0; i < 8; ++i) REQUIRE(store.add(w00, 1, schedule(), slots[i]).ok());
  for (size_t i = 0; i < 4; ++i) REQUIRE(store.add(w10, 1, schedule(), slots[i]).ok());
  CHECK(store.writers() == std::vector<Writer>{w00, w10});
  CHECK(store.latest_complete(w00).front()->step == 4);
  CHECK(store.windows().size() == 3);  // 0.0's windows 4 and 0 (the one before is kept), 1.0's 0
  CHECK(store.latest_complete(w10).front()->step == 0);
  CHECK(store.latest_complete(Writer{2, 0}).empty());

  // past the budget: refused, naming the rule; what is held stays
  uint64_t before = store.bytes();
  auto over = store.add(w10, 1, schedule(), slots[4]);
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message().find("slice of 1.0 for iteration 4 refused: ") == 0);
  CHECK(over.error().message().find("past its budget of " + std::to_string(store.budget())) != std::string::npos);
  CHECK(store.bytes() == before);
  CHECK(store.latest_complete(w10).size() == 4);

  // damaged on the way: refused, naming the unit
  SparseSlot bad = slots[5];
  bad.units.begin()->second.w[0] += 1.0f;
  store.drop(w10);
  auto damaged = store.add(w10, 1, schedule(), bad);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.error().message().find("does not match its checksum (damaged on the way)") != std::string::npos);

  // a new schedule for a writer: its last complete window stays until the new one has two complete
  // windows (a writer's newest slot may die on its way: the window before must be there, across a
  // switch too), the older ones go once the new one has one
  plan::CheckpointSchedule two{2, 2, {{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11, 12}}};
  auto units = p.units();
  std::vector<const Unit*> cu(units.begin(), units.end());
  REQUIRE(store.add(w00, 1, two, take_slot(two, 0, 8, 1.0, p.dims, cu)).ok());
  CHECK(store.latest_complete(w00).front()->step == 4);  // the old schedule's window, still
  REQUIRE(store.add(w00, 1, two, take_slot(two, 1, 9, 1.0, p.dims, cu)).ok());
  CHECK(store.latest_complete(w00).size() == 2);  // the new one: iterations 8 and 9
  CHECK(store.latest_complete(w00).front()->step == 8);
  auto starts = [&] {
    std::vector<uint64_t> out;
    for (const auto& h : store.windows())
      if (h.writer == w00) out.push_back(h.from);
    return out;
  };
  CHECK(starts() == std::vector<uint64_t>{8, 4});  // the old schedule's newest window is kept, not 0
  CHECK(store.bytes() < 3 * window_bytes);
  REQUIRE(store.add(w00, 1, two, take_slot(two, 0, 10, 1.0, p.dims, cu)).ok());
  REQUIRE(store.add(w00, 1, two, take_slot(two, 1, 11, 1.0, p.dims, cu)).ok());
  CHECK(starts() == std::vector<uint64_t>{10, 8});  // two of its own: the old schedule's are gone
  CHECK(store.bytes() < 2 * window_bytes);
}

TEST_CASE("a slice store answers a fetch from whichever writer holds each unit, reports its windows, and drops writers that stopped") {
  Corpus c = corpus(tiny().vocab);
  Params p = Params::create(tiny(), 3, Params::all_experts(tiny()));
  std::vector<SparseSlot> slots;
  for (uint64_t step = 0; step < 12; ++step) slots.push_back(slot_after(step, train_step(p, c, step), p));
  // two writers splitting the units: the embedding on one, everything else on the other
  auto only = [](const SparseSlot& s, bool embedding) {
    SparseSlot out{s.step, s.index, s.grad_norm, {}};
    for (const auto& [id, copy] : s.units)
      if ((id.kind == UnitKind::embedding) == embedding) out.units[id] = copy;
    return out;
  };
  const Writer a{1, 0}, b{2, 0};
  SliceStore store(1ull << 30);
  for (size_t i = 0; i < 8; ++i) REQUIRE(store.add(a, 3, schedule(), only(slots[i], true)).ok());
  for (size_t i = 0; i < 8; ++i) REQUIRE(store.add(b, 3, schedule(), only(slots[i], false)).ok());
  auto held = store.windows();  // each writer's two newest, newest first
  REQUIRE(held.size() == 4);
  CHECK(held[0].writer == a);
  CHECK(held[0].from == 4);
  CHECK(held[0].to == 7);
  CHECK(held[0].plan == 3);
  CHECK(held[0].units == std::vector<UnitId>{UnitId{UnitKind::embedding, -1, -1}});
  CHECK(held[1].from == 0);
  CHECK(held[2].writer == b);
  CHECK(held[2].units.size() == 12);

  std::set<UnitId> wanted{UnitId{UnitKind::embedding, -1, -1}, UnitId{UnitKind::expert, 1, 2}};
  std::vector<UnitId> missing;
  auto view = store.window_slots(4, wanted, &missing);
  CHECK(missing.empty());
  REQUIRE(view.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    CHECK(view[i].step == 4 + i);
    CHECK(view[i].grad_norm == slots[4 + i].grad_norm);
    for (const auto& [id, copy] : view[i].units) CHECK(copy->checksum == slots[4 + i].units.at(id).checksum);
  }
  missing.clear();
  CHECK(store.window_slots(0, wanted, &missing).size() == 4);  // the window before is kept too
  CHECK(missing.empty());

  // a writer of the same plan one window behind is kept: its slots may be on their way; a's window 0
  // is now superseded by two newer ones
  for (size_t i = 8; i < 12; ++i) REQUIRE(store.add(a, 3, schedule(), only(slots[i], true)).ok());
  CHECK(store.writers() == std::vector<Writer>{a, b});
  CHECK(store.latest_complete(b).front()->step == 4);
  missing.clear();
  store.window_slots(0, wanted, &missing);
  CHECK(missing == std::vector<UnitId>{UnitId{UnitKind::embedding, -1, -1}});
  // writer a moves to plan 4: its slots start a new window; b stops writing and, once a completes
  // a window under the newer plan that b has no slot of, nor of the window before, b is dropped.
  // c, of plan 3 too, wrote the window before (8..11) and is kept: a writer of plan 4 killed before
  // its first slot got anywhere leaves that window as the newest every writer shares
  const Writer c3{3, 0};
  for (size_t i = 8; i < 12; ++i) REQUIRE(store.add(c3, 3, schedule(), only(slots[i], false)).ok());
  std::vector<SparseSlot> more;
  for (uint64_t step = 12; step < 20; ++step) more.push_back(slot_after(step, train_step(p, c, step), p));
  for (size_t i = 0; i < 4; ++i) REQUIRE(store.add(a, 4, schedule(), only(more[i], true)).ok());
  CHECK(store.writers() == std::vector<Writer>{a, c3});
  CHECK(store.windows().front().plan == 4);
  CHECK(store.windows().front().from == 12);
  missing.clear();
  store.window_slots(8, wanted, &missing);  // a's window 8 (plan 3) kept beside its plan-4 one, c's too
  CHECK(missing.empty());
  for (size_t i = 4; i < 8; ++i) REQUIRE(store.add(a, 4, schedule(), only(more[i], true)).ok());
  CHECK(store.writers() == std::vector<Writer>{a});  // two windows of plan 4 now: c has stopped
}

TEST_CASE("a slot travels as a SlicePut and its frames, and a wrong frame or unit is refused with the field") {
  Corpus c = corpus(tiny().vocab);
  Params p = Params::create(tiny(), 3, Params::all_experts(tiny()));
  auto slot = slot_after(0, train_step(p, c, 0), p);
  wire::SlicePut head;
  head.writer_node = 4, head.writer_index = 1, head.plan = 7, head.schedule = schedule();
  auto parts = encode_slot(head, slot);
  size_t frames = 0;
  for (const auto& [id, copy] : slot.units) frames += copy.full ? 3 : 1;
  REQUIRE(parts.size() == 2 + frames);

  auto back = decode_slot(parts, ModelShape(tiny()));
  REQUIRE_MESSAGE(back.ok(), back.error().message());
  CHECK(back->head.writer_node == 4);
  CHECK(back->head.plan == 7);
  CHECK(back->head.schedule == schedule());
  CHECK(back->slot.step == slot.step);
  CHECK(back->slot.grad_norm == slot.grad_norm);
  REQUIRE(back->slot.units.size() == slot.units.size());
  for (const auto& [id, copy] : slot.units) {
    const auto& got = back->slot.units.at(id);
    CHECK(got.w == copy.w);
    CHECK(got.m == copy.m);
    CHECK(got.checksum == unit_checksum(got));
  }

  // a frame short of what the body announces
  auto cut = encode_slot(head, slot);
  cut[2] = zmq::message_t(cut[2].data(), cut[2].size() - 4);
  auto short_frame = decode_slot(cut, ModelShape(tiny()));
  REQUIRE_FALSE(short_frame.ok());
  CHECK(short_frame.error().message().find("SlicePut.units[0] weights: a frame of") == 0);
  // a frame missing
  auto fewer = encode_slot(head, slot);
  fewer.pop_back();
  auto missing = decode_slot(fewer);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("float frames, the message has") != std::string::npos);
  // a model without that unit (the agent, knowing no shape, takes it)
  ModelShape smaller = tiny();
  smaller.layers = 1;
  auto unknown = decode_slot(encode_slot(head, slot), smaller);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message().find("no unit kind 1 layer 1 expert -1 in the model") != std::string::npos);
  CHECK(decode_slot(encode_slot(head, slot)).ok());
}

namespace {

// An upstream log of one iteration: layer 1's tokens (four, k = 2) sent to experts 2 and 3, and
// layer 0's of pass 1 (two) to expert 0.
model::IterationLog upstream_log(float base) {
  model::IterationLog log;
  auto tokens = [&](size_t n, float v) {
    model::TokenRows t;
    t.k = 2;
    for (size_t i = 0; i < n * size_t(tiny().d); ++i) t.x.push_back(v + float(i)), t.dy.push_back(-v - float(i));
    for (size_t i = 0; i < n * 2; ++i) t.w.push_back(0.5f + float(i) / 16);
    return t;
  };
  log.tokens[{0, 1}] = tokens(4, base);
  log.tokens[{1, 0}] = tokens(2, base + 200);
  log.rows[{0, 1, 2}] = model::SentRows{{2, 1, 0}, {0, 1}, {0, 3, 6}, 0};
  log.rows[{0, 1, 3}] = model::SentRows{{1, 0, 0}, {0, 2}, {5}, 0};
  log.rows[{1, 0, 0}] = model::SentRows{{0, 2, 0}, {1}, {1, 2}, 0};
  for (auto& [k, r] : log.rows) r.checksum = log_checksum(r);
  for (auto& [k, t] : log.tokens) t.checksum = log_checksum(t);
  return log;
}

wire::Parts encoded(const model::IterationLog& log, uint64_t step) {
  wire::SlicePut head;
  head.writer_node = 5, head.writer_index = 1, head.plan = 9, head.schedule = schedule(), head.step = step;
  return encode_log(head, whole(log));
}

HeldLog held(const model::IterationLog& log) { return HeldLog{9, log}; }

}  // namespace

TEST_CASE("an upstream log travels as a log-only SlicePut, and a damaged row or a wrong expert is found") {
  const auto log = upstream_log(1);
  auto parts = encoded(log, 12);
  REQUIRE(parts.size() == 2 + 3 * 2);  // three frames per layer's tokens, none per expert
  auto back = decode_slot(parts, ModelShape(tiny()));
  REQUIRE_MESSAGE(back.ok(), back.error().message());
  CHECK(back->head.log_only);
  CHECK(back->head.step == 12);
  CHECK(back->slot.units.empty());
  REQUIRE(back->log.rows.size() == 3);
  for (const auto& [k, r] : log.rows) {
    const auto& got = back->log.rows.at(k);
    CHECK(got.slots == r.slots);
    CHECK(got.to == r.to);
    CHECK(got.holders == r.holders);
  }
  REQUIRE(back->log.tokens.size() == 2);
  for (const auto& [k, t] : log.tokens) {
    const auto& got = back->log.tokens.at(k);
    CHECK(got.x == t.x);
    CHECK(got.dy == t.dy);
    CHECK(got.w == t.w);
    CHECK(got.k == 2);
  }
  CHECK(back->log.bytes() == log.bytes());
  CHECK(damaged_logs(*back).empty());
  // a flipped sign in layer 1's gradients: that part, named
  auto* f = static_cast<float*>(parts[2 + 3 * 0 + 1].data());  // (pass 0, layer 1) is the first table: its gradients
  f[0] = -f[0];
  auto damaged = decode_slot(parts, ModelShape(tiny()));
  REQUIRE(damaged.ok());
  CHECK(damaged_logs(*damaged) == std::vector<std::string>{"layer 1's tokens"});
  // an expert the model does not have
  model::IterationLog wrong = log;
  wrong.rows[{0, 1, 7}] = log.rows.at({0, 1, 3});
  auto refused = decode_slot(encoded(wrong, 12), ModelShape(tiny()));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message().find("layer 1 expert 7 is not an expert of the model") != std::string::npos);
}

TEST_CASE("a slice store keeps a writer's logs as far back as its windows, within its budget") {
  SliceStore store(1 << 20);
  const Writer w{5, 1};
  const auto sched = schedule();  // a period of 4: two complete windows and the one being filled, 12 iterations
  for (uint64_t s = 0; s < 20; ++s) REQUIRE(store.add_log(w, s, sched, held(upstream_log(float(s)))).ok());
  auto kept = store.logs(0, 100);
  REQUIRE(kept.size() == 3 * sched.period);
  CHECK(std::get<1>(kept.front()) == 20 - 3 * sched.period);
  CHECK(std::get<1>(kept.back()) == 19);
  CHECK(std::get<2>(kept.back())->log.tokens.at({0, 1}).x.front() == 19.0f);
  CHECK(store.logs(17, 18).size() == 2);
  CHECK(store.log_bytes() == 3 * sched.period * upstream_log(0).bytes());
  CHECK(store.bytes() == store.log_bytes());
  // the same iteration again (the step ran again): replaced, not added
  REQUIRE(store.add_log(w, 19, sched, held(upstream_log(-1))).ok());
  CHECK(store.logs(19, 19).size() == 1);
  CHECK(std::get<2>(store.logs(19, 19).front())->log.tokens.at({0, 1}).x.front() == -1.0f);
  // past the budget: refused with the rule, what is held stays
  SliceStore small(upstream_log(0).bytes() * 2);
  REQUIRE(small.add_log(w, 0, sched, held(upstream_log(0))).ok());
  REQUIRE(small.add_log(w, 1, sched, held(upstream_log(1))).ok());
  auto over = small.add_log(w, 2, sched, held(upstream_log(2)));
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().message().find("log of 5.1 for iteration 2 refused") != std::string::npos);
  CHECK(over.error().message().find("past its budget") != std::string::npos);
  CHECK(small.logs(0, 10).size() == 2);
  // a part without its checksum is refused
  HeldLog unsigned_log{9, upstream_log(3)};
  unsigned_log.log.tokens.begin()->second.checksum = 0;
  CHECK_FALSE(store.add_log(w, 20, sched, unsigned_log).ok());
  // a writer that left: its logs go
  store.drop(w);
  CHECK(store.logs(0, 100).empty());
  CHECK(store.log_bytes() == 0);
}
