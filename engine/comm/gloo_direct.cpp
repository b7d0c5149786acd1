// gloo_direct.cpp — GlooCollectives' direct collectives (see gloo_collectives.h): allgather,
// allreduce and alltoallv as one or two rounds of messages posted to every peer at once, over
// Gloo's unbound buffers.
//
// Why: a message on Gloo's TCP transport is a hand-off through both ranks' I/O threads (the
// receiver announces its buffer, the sender's payload follows), and a ring collective chains
// size-1 (allgather) or 2(size-1) (allreduce) of them one after the other. With several workers
// sharing cores each hand-off waits for a thread to be scheduled, so the chain, not the bytes, set
// the time of a step. Here every message of a round travels at once: the rounds are the chain.
//
// Transport: over UCX shared memory when every rank is on this host (shm_plane.h), else over
// Gloo's unbound buffers (registered for abort()'s helper thread). Either way every message of a
// round is posted before any is awaited.
//
// Allreduce: the data is cut into size() chunks (chunk c = [n c / size, n (c + 1) / size)). Round
// one sends chunk c to rank c; rank c sums the size() parts of its chunk in rank order (rank 0's
// part, plus rank 1's, ...); round two sends each rank's sum to every other rank. Every element is
// summed once, by one rank, in a fixed order, so every rank ends with the same bits, run after
// run. Inputs of at most kGatherSumBytes skip the chunking: every rank receives every other rank's
// whole input and sums the parts itself, in the same rank order (one round; same bits).
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "comm/gloo_collectives.h"
#include "comm/shm_plane.h"

namespace sal::comm {

namespace {

// Direct rounds use slots of their own: prefix byte 0x5B (Gloo's collectives use 0x01..0x08,
// our point-to-point 0x5A), the operation's tag in the low 32 bits.
constexpr uint64_t kDirectSlotBase = uint64_t(0x5B) << 56;
// Allreduce inputs up to this size go in one round (each rank receives size()-1 whole inputs):
// below it the second round's latency costs more than the extra bytes.
constexpr size_t kGatherSumBytes = 16 * 1024;

// Element range [lo, hi) of chunk c of n elements cut in `parts`.
size_t chunk_lo(size_t n, size_t parts, size_t c) { return n * c / parts; }

}  // namespace

void GlooCollectives::round(const void* from, const std::vector<Message>& sends, void* into,
                            const std::vector<Message>& recvs, uint32_t tag) {
  if (shm_) {  // the same host: over shared memory (shm_plane.h)
    std::vector<SendSpec> out;
    std::vector<RecvSpec> in;
    for (const Message& m : sends)
      if (m.bytes > 0) out.push_back({m.peer, static_cast<const char*>(from) + m.offset, m.bytes, tag});
    for (const Message& m : recvs)
      if (m.bytes > 0) in.push_back({m.peer, static_cast<char*>(into) + m.offset, m.bytes, tag});
    shm_->transfer(ShmPlane::Kind::round, out, in, op_timeout());
    return;
  }
  auto extent = [](const std::vector<Message>& ms) {
    size_t end = 0;
    for (const Message& m : ms) end = std::max(end, m.offset + m.bytes);
    return end;
  };
  auto fb = buffer(from, extent(sends));
  auto ib = buffer(into, extent(recvs));
  Tracker t(this, {fb.get(), ib.get()});
  const uint64_t slot = kDirectSlotBase | tag;
  const std::chrono::milliseconds timeout = op_timeout();
  size_t posted_recvs = 0, posted_sends = 0;
  for (const Message& m : recvs)
    if (m.bytes > 0) ib->recv(m.peer, slot, m.offset, m.bytes), ++posted_recvs;
  for (const Message& m : sends)
    if (m.bytes > 0) fb->send(m.peer, slot, m.offset, m.bytes), ++posted_sends;
  for (size_t i = 0; i < posted_recvs; ++i)
    if (!ib->waitRecv(timeout)) throw std::runtime_error("a receive was interrupted");
  for (size_t i = 0; i < posted_sends; ++i)
    if (!fb->waitSend(timeout)) throw std::runtime_error("a send was interrupted");
}

void GlooCollectives::direct_allgather(const void* in, size_t bytes, void* out) {
  const size_t me = size_t(rank_);
  std::memmove(static_cast<char*>(out) + me * bytes, in, bytes);
  std::vector<Message> sends, recvs;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    sends.push_back({p, 0, bytes});
    recvs.push_back({p, size_t(p) * bytes, bytes});
  }
  round(in, sends, out, recvs, next_tag());
}

template <class T>
void GlooCollectives::direct_allreduce(T* data, size_t n) {
  const size_t W = size_t(size_), me = size_t(rank_);
  if (n * sizeof(T) <= kGatherSumBytes) {
    std::vector<T> all(n * W);
    direct_allgather(data, n * sizeof(T), all.data());
    std::copy(all.begin(), all.begin() + long(n), data);
    for (size_t r = 1; r < W; ++r)
      for (size_t i = 0; i < n; ++i) data[i] += all[r * n + i];
    return;
  }
  const size_t lo = chunk_lo(n, W, me), m = chunk_lo(n, W, me + 1) - lo;
  std::vector<T> parts(m * W);  // [rank][element of my chunk]
  std::copy(data + lo, data + lo + m, parts.begin() + long(me * m));
  std::vector<Message> out, in;
  for (size_t p = 0; p < W; ++p) {
    if (p == me) continue;
    const size_t plo = chunk_lo(n, W, p), pm = chunk_lo(n, W, p + 1) - plo;
    out.push_back({int(p), plo * sizeof(T), pm * sizeof(T)});
    in.push_back({int(p), p * m * sizeof(T), m * sizeof(T)});
  }
  round(data, out, parts.data(), in, next_tag());  // my chunk's parts arrive; theirs leave
  std::copy(parts.begin(), parts.begin() + long(m), data + lo);
  for (size_t r = 1; r < W; ++r)
    for (size_t i = 0; i < m; ++i) data[lo + i] += parts[r * m + i];
  // the sums: mine to everyone, everyone's into their chunk (out and in swap roles)
  std::vector<Message> mine, theirs;
  for (size_t p = 0; p < W; ++p) {
    if (p == me) continue;
    const size_t plo = chunk_lo(n, W, p), pm = chunk_lo(n, W, p + 1) - plo;
    mine.push_back({int(p), lo * sizeof(T), m * sizeof(T)});
    theirs.push_back({int(p), plo * sizeof(T), pm * sizeof(T)});
  }
  round(data, mine, data, theirs, next_tag());
}

template void GlooCollectives::direct_allreduce<float>(float*, size_t);
template void GlooCollectives::direct_allreduce<double>(double*, size_t);

void GlooCollectives::direct_alltoallv(const float* send, const std::vector<int64_t>& send_counts, float* recv,
                                       const std::vector<int64_t>& recv_counts) {
  const size_t W = size_t(size_), me = size_t(rank_);
  std::vector<size_t> send_at(W + 1, 0), recv_at(W + 1, 0);
  for (size_t i = 0; i < W; ++i) {
    send_at[i + 1] = send_at[i] + size_t(send_counts[i]);
    recv_at[i + 1] = recv_at[i] + size_t(recv_counts[i]);
  }
  if (send_counts[me] != recv_counts[me])
    throw std::invalid_argument("this rank sends itself " + std::to_string(send_counts[me]) + " floats but expects " +
                                std::to_string(recv_counts[me]));
  std::memmove(recv + recv_at[me], send + send_at[me], size_t(send_counts[me]) * sizeof(float));
  std::vector<Message> sends, recvs;
  for (size_t p = 0; p < W; ++p) {
    if (p == me) continue;
    sends.push_back({int(p), send_at[p] * sizeof(float), size_t(send_counts[p]) * sizeof(float)});
    recvs.push_back({int(p), recv_at[p] * sizeof(float), size_t(recv_counts[p]) * sizeof(float)});
  }
  round(send, sends, recv, recvs, next_tag());
}

}  // namespace sal::comm
