// slice_frames.cpp — see slice_frames.h.
#include "ckpt/slice_frames.h"
#include "wire/unit_refs.h"

#include <cstring>

namespace sal::ckpt {
namespace {

zmq::message_t frame_of(const std::vector<float>& v) { return zmq::message_t(v.data(), v.size() * sizeof(float)); }

wire::Parts finish(wire::SlicePut& head, const std::vector<std::pair<UnitId, const UnitCopy*>>& units) {
  head.units.clear();
  for (const auto& [id, c] : units)
    head.units.push_back({uint8_t(id.kind), int32_t(id.layer), int32_t(id.expert), c->full, uint64_t(c->w.size()), c->checksum});
  wire::Parts parts = wire::encode(head);
  for (const auto& [id, c] : units) {
    parts.push_back(frame_of(c->w));
    if (c->full) parts.push_back(frame_of(c->m)), parts.push_back(frame_of(c->v));
  }
  return parts;
}

Status read_frame(const zmq::message_t& f, uint64_t floats, std::vector<float>& out, const std::string& what) {
  if (f.size() % sizeof(float) != 0 || f.size() / sizeof(float) != floats)
    return fail(what, ": a frame of ", f.size(), " bytes, the body announces ", floats, " floats");
  out.resize(floats);
  if (floats) std::memcpy(out.data(), f.data(), f.size());
  return {};
}

// The body's logs, then their frames (inputs, gradients) from parts[f].
Status read_logs(const wire::Parts& parts, size_t f, const ModelShape* shape, DecodedSlot& out) {
  for (size_t i = 0; i < out.head.logs.size(); ++i) {
    const auto& l = out.head.logs[i];
    std::string what = "SlicePut.logs[" + std::to_string(i) + "]";
    if (shape && (l.layer < 0 || l.layer >= shape->layers || l.expert < 0 || l.expert >= shape->experts))
      return fail(what, ": layer ", l.layer, " expert ", l.expert, " is not an expert of the model");
    if (shape && l.floats % uint64_t(shape->d) != 0)
      return fail(what, ": ", l.floats, " floats are not rows of width ", shape->d);
    model::LogKey key{l.pass, l.layer, l.expert};
    if (out.log.rows.count(key)) return fail(what, ": layer ", l.layer, " expert ", l.expert, " pass ", l.pass, " twice");
    model::SentRows& r = out.log.rows[key];
    r.to = l.to, r.holders = l.holders;
    out.checksums[key] = l.checksum;
    SAL_TRY(read_frame(parts[f++], l.floats, r.x, what + " inputs"));
    SAL_TRY(read_frame(parts[f++], l.floats, r.dy, what + " gradients"));
  }
  return {};
}

Result<DecodedSlot> decode(const wire::Parts& parts, const ModelShape* shape) {
  if (parts.size() < 2) return fail("SlicePut: expected a header and a body, got ", parts.size(), " frames");
  wire::Parts first;
  first.emplace_back(parts[0].data(), parts[0].size());
  first.emplace_back(parts[1].data(), parts[1].size());
  auto env = wire::open(first);
  if (!env) return env.error();
  auto head = wire::decode<wire::SlicePut>(*env);
  if (!head) return head.error();
  size_t frames = 0;
  for (const auto& u : head->units) frames += u.full ? 3 : 1;
  frames += 2 * head->logs.size();
  if (parts.size() != 2 + frames)
    return fail("SlicePut: the body announces ", frames, " float frames, the message has ", parts.size() - 2);
  DecodedSlot out{*head, SparseSlot{head->step, head->index, head->grad_norm, {}}};
  size_t f = 2;
  for (size_t i = 0; i < head->units.size(); ++i) {
    const auto& u = head->units[i];
    std::string what = "SlicePut.units[" + std::to_string(i) + "]";
    UnitId id{UnitKind(u.kind), u.layer, u.expert};
    if (u.kind > uint8_t(UnitKind::expert)) return fail(what, ": unit kind ", int(u.kind));
    if (shape) {
      auto known = wire::unit_of(wire::SliceUnitRef{u.kind, u.layer, u.expert}, *shape);
      if (!known) return known.error().with_context(what);
      if (u.floats != unit_size(*shape, id.kind))
        return fail(what, ": ", id.name(), " has ", unit_size(*shape, id.kind), " floats, the body says ", u.floats);
    }
    if (out.slot.units.count(id)) return fail(what, ": ", id.name(), " twice");
    UnitCopy& c = out.slot.units[id];
    c.full = u.full;
    c.checksum = u.checksum;
    SAL_TRY(read_frame(parts[f++], u.floats, c.w, what + " weights"));
    if (u.full) {
      SAL_TRY(read_frame(parts[f++], u.floats, c.m, what + " first moments"));
      SAL_TRY(read_frame(parts[f++], u.floats, c.v, what + " second moments"));
    }
  }
  SAL_TRY(read_logs(parts, f, shape, out));
  return out;
}

}  // namespace

wire::Parts encode_slot(wire::SlicePut head, const SlotView& slot) {
  head.step = slot.step, head.index = slot.index, head.grad_norm = slot.grad_norm;
  return finish(head, slot.units);
}

wire::Parts encode_slot(wire::SlicePut head, const SparseSlot& slot) {
  SlotView v{slot.step, slot.index, slot.grad_norm, {}};
  for (const auto& [id, c] : slot.units) v.units.emplace_back(id, &c);
  return encode_slot(std::move(head), v);
}

wire::Parts encode_log(wire::SlicePut head, const LogRows& rows, const std::map<model::LogKey, uint64_t>& checksums) {
  head.units.clear();
  head.logs.clear();
  head.log_only = true;
  for (const auto& [key, r] : rows) {
    auto known = checksums.find(key);
    head.logs.push_back({key.pass, int32_t(key.layer), int32_t(key.expert), r->to, r->holders, uint64_t(r->x.size()),
                         known != checksums.end() ? known->second : log_checksum(*r)});
  }
  wire::Parts parts = wire::encode(head);
  for (const auto& [key, r] : rows) parts.push_back(frame_of(r->x)), parts.push_back(frame_of(r->dy));
  return parts;
}

std::vector<model::LogKey> damaged_logs(const DecodedSlot& d) {
  std::vector<model::LogKey> out;
  for (const auto& [key, r] : d.log.rows) {
    auto it = d.checksums.find(key);
    if (it == d.checksums.end() || it->second != log_checksum(r)) out.push_back(key);
  }
  return out;
}

Result<DecodedSlot> decode_slot(const wire::Parts& parts, const ModelShape& shape) { return decode(parts, &shape); }
Result<DecodedSlot> decode_slot(const wire::Parts& parts) { return decode(parts, nullptr); }

}  // namespace sal::ckpt
