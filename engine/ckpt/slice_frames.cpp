// slice_frames.cpp — see slice_frames.h.
#include "ckpt/slice_frames.h"
#include "wire/unit_refs.h"

#include <algorithm>
#include <cstdint>
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
  const auto* data = static_cast<const float*>(f.data());
  if (reinterpret_cast<uintptr_t>(data) % alignof(float) == 0) {
    out.assign(data, data + floats);  // no zeroing first: one pass over the bytes
  } else {
    out.resize(floats);
    if (floats) std::memcpy(out.data(), f.data(), f.size());
  }
  return {};
}

// The body's expert assignments (no frames), then its layers' tokens, three frames each from parts[f].
Status read_logs(const wire::Parts& parts, size_t f, const ModelShape* shape, DecodedSlot& out) {
  auto in_model = [&](int layer, int expert) {
    return !shape || (layer >= 0 && layer < shape->layers && expert >= 0 && expert < shape->experts);
  };
  for (size_t i = 0; i < out.head.logs.size(); ++i) {
    const auto& l = out.head.logs[i];
    std::string what = "SlicePut.logs[" + std::to_string(i) + "]";
    if (!in_model(l.layer, l.expert)) return fail(what, ": layer ", l.layer, " expert ", l.expert, " is not an expert of the model");
    model::LogKey key{l.pass, l.layer, l.expert};
    if (out.log.rows.count(key)) return fail(what, ": layer ", l.layer, " expert ", l.expert, " pass ", l.pass, " twice");
    out.log.rows[key] = model::SentRows{l.to, l.holders, l.slots, l.checksum};
  }
  for (size_t i = 0; i < out.head.token_logs.size(); ++i) {
    const auto& t = out.head.token_logs[i];
    std::string what = "SlicePut.token_logs[" + std::to_string(i) + "]";
    if (!in_model(t.layer, 0)) return fail(what, ": layer ", t.layer, " is not a layer of the model");
    if (t.k == 0) return fail(what, ": k is 0");
    const model::TokenKey key{t.pass, t.layer};
    if (out.log.tokens.count(key)) return fail(what, ": layer ", t.layer, " pass ", t.pass, " twice");
    model::TokenRows& rows = out.log.tokens[key];
    rows.k = int(t.k), rows.checksum = t.checksum;
    const uint64_t width = parts[f].size() / sizeof(float) / std::max<uint64_t>(t.tokens, 1);
    if (shape && t.tokens && width != uint64_t(shape->d))
      return fail(what, ": ", parts[f].size() / sizeof(float), " input floats are not ", t.tokens, " rows of width ", shape->d);
    SAL_TRY(read_frame(parts[f++], t.tokens * width, rows.x, what + " inputs"));
    SAL_TRY(read_frame(parts[f++], t.tokens * width, rows.dy, what + " gradients"));
    SAL_TRY(read_frame(parts[f++], t.tokens * t.k, rows.w, what + " weights"));
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
  frames += 3 * head->token_logs.size();
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

LogView whole(const model::IterationLog& log) {
  LogView v;
  for (const auto& [k, r] : log.rows) v.rows.emplace_back(k, &r);
  for (const auto& [k, t] : log.tokens) v.tokens.emplace_back(k, &t);
  return v;
}

wire::Parts encode_log(wire::SlicePut head, const LogView& log) {
  head.units.clear();
  head.logs.clear();
  head.token_logs.clear();
  head.log_only = true;
  for (const auto& [key, r] : log.rows)
    head.logs.push_back({key.pass, int32_t(key.layer), int32_t(key.expert), r->to, r->holders, r->slots,
                         r->checksum ? r->checksum : log_checksum(*r)});
  for (const auto& [key, t] : log.tokens)
    head.token_logs.push_back({key.first, int32_t(key.second), uint32_t(t->k), uint64_t(t->w.size() / std::max(t->k, 1)),
                               t->checksum ? t->checksum : log_checksum(*t)});
  wire::Parts parts = wire::encode(head);
  for (const auto& [key, t] : log.tokens) {
    parts.push_back(frame_of(t->x));
    parts.push_back(frame_of(t->dy));
    parts.push_back(frame_of(t->w));
  }
  return parts;
}

std::vector<std::string> damaged_logs(const DecodedSlot& d) {
  std::vector<std::string> out;
  for (const auto& [key, r] : d.log.rows)
    if (r.checksum != log_checksum(r))
      out.push_back("layer " + std::to_string(key.layer) + " expert " + std::to_string(key.expert));
  for (const auto& [key, t] : d.log.tokens)
    if (t.checksum != log_checksum(t)) out.push_back("layer " + std::to_string(key.second) + "'s tokens");
  return out;
}

Result<DecodedSlot> decode_slot(const wire::Parts& parts, const ModelShape& shape) { return decode(parts, &shape); }
Result<DecodedSlot> decode_slot(const wire::Parts& parts) { return decode(parts, nullptr); }

}  // namespace sal::ckpt
