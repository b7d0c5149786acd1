// cmd_keygen.cpp — `salamander keygen NAME`: a CURVE key pair for non-loopback endpoints.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "wire/curve.h"

namespace sal::cli {

int cmd_keygen(const Command&, const Parsed& p) {
  auto kp = wire::generate_key_files(p.positional[0]);
  if (!kp) {
    std::fprintf(stderr, "salamander keygen: %s\n", kp.error().message().c_str());
    return 1;
  }
  std::printf("wrote %s.key and %s.pub\npublic key: %s\n", p.positional[0].c_str(), p.positional[0].c_str(),
              kp->public_key.c_str());
  return 0;
}

}  // namespace sal::cli
