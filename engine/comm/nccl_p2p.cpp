// nccl_p2p.cpp — point to point for NcclCollectives (nccl_collectives.h): send, recv and exchange,
// each grouped ncclSend/ncclRecv calls under run() (nccl_collectives.cpp). With verify_sizes, each
// pair of ranks first swaps one 64-byte Summary per direction (message count, bytes and a hash of
// the (tag, bytes) list), so a mismatch fails both ranks with a message naming the sizes instead of
// hanging or corrupting inside NCCL.
#include "comm/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "comm/nccl_internal.h"

namespace sal::comm {

using nccl_detail::cuda_error;
using nccl_detail::nccl_error;

namespace {

constexpr uint64_t kSummaryMagic = 0x53414C4E43434C31ull;  // "SALNCCL1"

// One peer's view of a point-to-point exchange, sent to that peer before any payload.
struct Summary {
  uint64_t magic = kSummaryMagic;
  uint64_t n_to = 0;        // messages this rank sends to the peer
  uint64_t n_from = 0;      // messages this rank expects from the peer
  uint64_t bytes_to = 0;
  uint64_t bytes_from = 0;
  uint64_t hash_to = 0;     // FNV-1a over the (tag, bytes) list in matching order
  uint64_t hash_from = 0;
  uint64_t reserved = 0;
};
static_assert(sizeof(Summary) == 64);

uint64_t fnv_add(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xFF)) * 1099511628211ull;
  return h;
}
constexpr uint64_t kFnvStart = 1469598103934665603ull;

}  // namespace

Status NcclCollectives::send(int peer, const void* data, size_t bytes, uint32_t tag) {
  return exchange({SendSpec{peer, data, bytes, tag}}, {});
}

Status NcclCollectives::recv(int peer, void* data, size_t bytes, uint32_t tag) {
  return exchange({}, {RecvSpec{peer, data, bytes, tag}});
}

// NCCL has no tags: messages between two ranks match in posting order. Both sides therefore post
// each peer's messages sorted by (tag, position), which pairs them exactly as tag-then-order
// matching would whenever both sides name the same (tag, bytes) lists — which the summaries check
// first. Empty messages move nothing and are skipped on both sides alike.
Status NcclCollectives::exchange(const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) {
  const auto [what, problem] = check_exchange(rank_, size_, sends, recvs);
  return run(what, [&]() -> Status {
    if (!problem.empty()) return fail(problem);
    // Per peer, the positions of its sends and receives in matching order.
    std::map<int, std::pair<std::vector<size_t>, std::vector<size_t>>> peers;
    for (size_t i = 0; i < sends.size(); ++i) peers[sends[i].peer].first.push_back(i);
    for (size_t i = 0; i < recvs.size(); ++i) peers[recvs[i].peer].second.push_back(i);
    if (peers.empty()) return ok_status();
    for (auto& [peer, lists] : peers) {
      std::stable_sort(lists.first.begin(), lists.first.end(), [&](size_t a, size_t b) { return sends[a].tag < sends[b].tag; });
      std::stable_sort(lists.second.begin(), lists.second.end(), [&](size_t a, size_t b) { return recvs[a].tag < recvs[b].tag; });
    }
    if (opts_.verify_sizes) {
      const size_t k = peers.size();
      SAL_TRY(scratch_->ensure(2 * k * sizeof(Summary), stream_));
      Summary* out = scratch_->host_as<Summary>();
      Summary* in = scratch_->host_as<Summary>(k * sizeof(Summary));
      size_t j = 0;
      for (const auto& [peer, lists] : peers) {
        Summary s;
        s.hash_to = s.hash_from = kFnvStart;
        for (size_t i : lists.first) {
          s.n_to++;
          s.bytes_to += sends[i].bytes;
          s.hash_to = fnv_add(fnv_add(s.hash_to, sends[i].tag), sends[i].bytes);
        }
        for (size_t i : lists.second) {
          s.n_from++;
          s.bytes_from += recvs[i].bytes;
          s.hash_from = fnv_add(fnv_add(s.hash_from, recvs[i].tag), recvs[i].bytes);
        }
        out[j] = s;
        std::memset(static_cast<void*>(&in[j]), 0, sizeof(Summary));
        ++j;
      }
      enqueued_ = true;
      if (auto e = cudaMemcpyAsync(scratch_->dev, out, k * sizeof(Summary), cudaMemcpyHostToDevice, stream_);
          e != cudaSuccess) {
        return cuda_error(e, "cudaMemcpyAsync (summaries)");
      }
      ncclResult_t first = ncclGroupStart();
      j = 0;
      for (const auto& entry : peers) {
        const int peer = entry.first;
        if (first == ncclSuccess) {
          first = ncclSend(scratch_->dev_as<char>(j * sizeof(Summary)), sizeof(Summary), ncclUint8, peer, comm_, stream_);
        }
        if (first == ncclSuccess) {
          first = ncclRecv(scratch_->dev_as<char>((k + j) * sizeof(Summary)), sizeof(Summary), ncclUint8, peer, comm_,
                           stream_);
        }
        ++j;
      }
      ncclResult_t end = ncclGroupEnd();
      if (first != ncclSuccess) return nccl_error(first, "ncclSend/ncclRecv (summaries)", comm_);
      SAL_TRY(settle(end, "ncclGroupEnd (summaries)"));
      if (auto e = cudaMemcpyAsync(in, scratch_->dev_as<char>(k * sizeof(Summary)), k * sizeof(Summary),
                                   cudaMemcpyDeviceToHost, stream_);
          e != cudaSuccess) {
        return cuda_error(e, "cudaMemcpyAsync (summaries)");
      }
      SAL_TRY(wait_stream("the exchange of message summaries"));
      j = 0;
      for (const auto& entry : peers) {
        const int peer = entry.first;
        const Summary& mine = out[j];
        const Summary& theirs = in[j];
        ++j;
        if (theirs.magic != kSummaryMagic) return fail("rank ", peer, " sent a malformed message summary");
        if (theirs.n_to != mine.n_from || theirs.bytes_to != mine.bytes_from || theirs.hash_to != mine.hash_from) {
          return fail("rank ", peer, " sends ", theirs.n_to, " message(s), ", theirs.bytes_to, " bytes, to this rank, which expects ",
                      mine.n_from, " message(s), ", mine.bytes_from, " bytes",
                      theirs.n_to == mine.n_from && theirs.bytes_to == mine.bytes_from ? " (other tags or sizes)" : "");
        }
        if (theirs.n_from != mine.n_to || theirs.bytes_from != mine.bytes_to || theirs.hash_from != mine.hash_to) {
          return fail("rank ", peer, " expects ", theirs.n_from, " message(s), ", theirs.bytes_from,
                      " bytes, from this rank, which sends ", mine.n_to, " message(s), ", mine.bytes_to, " bytes",
                      theirs.n_from == mine.n_to && theirs.bytes_from == mine.bytes_to ? " (other tags or sizes)" : "");
        }
      }
    }
    bool any = false;
    for (const auto& s : sends) any = any || s.bytes > 0;
    for (const auto& r : recvs) any = any || r.bytes > 0;
    if (!any) return ok_status();
    enqueued_ = true;
    ncclResult_t first = ncclGroupStart();
    for (const auto& [peer, lists] : peers) {
      for (size_t i : lists.first) {
        if (first == ncclSuccess && sends[i].bytes > 0) {
          first = ncclSend(sends[i].data, sends[i].bytes, ncclUint8, peer, comm_, stream_);
        }
      }
      for (size_t i : lists.second) {
        if (first == ncclSuccess && recvs[i].bytes > 0) {
          first = ncclRecv(recvs[i].data, recvs[i].bytes, ncclUint8, peer, comm_, stream_);
        }
      }
    }
    ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess) return nccl_error(first, "ncclSend/ncclRecv", comm_);
    SAL_TRY(settle(end, "ncclGroupEnd (exchange)"));
    return wait_stream("the point-to-point transfers");
  });
}

}  // namespace sal::comm
