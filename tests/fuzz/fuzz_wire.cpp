// fuzz_wire.cpp — control messages as a peer sends them: a header frame and a body (the input split
// after the header's bytes). open() must refuse or accept; an accepted envelope must decode as at
// most one message type, and a decoded message must survive encode -> open -> decode unchanged.
#include <cstring>

#include "fuzz/targets.h"
#include "wire/codec.h"

namespace sal::fuzz {
namespace {

using namespace sal::wire;

std::string flatten(const Parts& p) {
  std::string s;
  for (const auto& m : p) s.append(static_cast<const char*>(m.data()), m.size());
  return s;
}

// Decodes as M; if that works, checks the round trip. Returns 1 if it decoded.
template <class M>
int decode_as(const Envelope& e) {
  auto m = decode<M>(e);
  if (!m) return 0;
  Parts again = encode(*m);
  std::string bytes = flatten(again);
  auto env2 = open(again);
  if (!env2) __builtin_trap();
  auto m2 = decode<M>(*env2);
  if (!m2 || flatten(encode(*m2)) != bytes) __builtin_trap();
  return 1;
}

template <class... M>
int decode_each(const Envelope& e) {
  return (decode_as<M>(e) + ...);
}

}  // namespace

int wire(const uint8_t* data, size_t size) {
  Parts p;
  size_t head = std::min(size, kHeaderBytes);
  p.emplace_back(data, head);
  if (size > head) p.emplace_back(data + head, size - head);
  auto env = open(p);
  if (!env) return 0;
  int n = decode_each<RegisterNode, Welcome, Heartbeat, Ping, WorkerEvent, Goodbye, Command, StepBegin, StepVote,
                      StepCommit, StepAbort, ErrorReply, JobSpec, PlanUpdate, PlanReady, SaveCheckpoint, SaveDone,
                      FaultArm, WorkerHello, WorkerStatus, ReplHello, ReplWelcome, ReplEval, ReplResult,
                      ReplComplete, ReplCompletions, ReplBye>(*env);
  if (n > 1) __builtin_trap();  // one envelope is one message
  return 0;
}

}  // namespace sal::fuzz
