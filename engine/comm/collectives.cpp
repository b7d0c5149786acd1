// collectives.cpp — see collectives.h: what every Collectives implementation shares.
#include "comm/collectives.h"

namespace sal::comm {

Result<std::unique_ptr<Collectives>> Collectives::narrow(std::vector<int>, std::string prefix) {
  return fail("a plane for '", prefix, "': this data plane cannot narrow to some of its ranks (only a plane over "
              "shared memory can)");
}

ExchangeCheck check_exchange(int rank, int size, const std::vector<SendSpec>& sends, const std::vector<RecvSpec>& recvs) {
  ExchangeCheck c;
  size_t sent = 0, received = 0;
  auto check_peer = [&](int peer) {
    if (peer < 0 || peer >= size) c.problem = "peer " + std::to_string(peer) + " out of range";
    else if (peer == rank) c.problem = "peer " + std::to_string(peer) + " is this rank";
  };
  for (const auto& s : sends) {
    check_peer(s.peer);
    if (s.bytes > 0 && !s.data) c.problem = "null send buffer";
    sent += s.bytes;
  }
  for (const auto& r : recvs) {
    check_peer(r.peer);
    if (r.bytes > 0 && !r.data) c.problem = "null receive buffer";
    received += r.bytes;
  }
  if (sends.size() == 1 && recvs.empty()) {
    c.what = "send of " + std::to_string(sent) + " bytes to rank " + std::to_string(sends[0].peer) + " (tag " +
             std::to_string(sends[0].tag) + ")";
  } else if (recvs.size() == 1 && sends.empty()) {
    c.what = "recv of " + std::to_string(received) + " bytes from rank " + std::to_string(recvs[0].peer) + " (tag " +
             std::to_string(recvs[0].tag) + ")";
  } else {
    c.what = "exchange of " + std::to_string(sends.size()) + " sends (" + std::to_string(sent) + " bytes) and " +
             std::to_string(recvs.size()) + " receives (" + std::to_string(received) + " bytes)";
  }
  return c;
}

}  // namespace sal::comm
