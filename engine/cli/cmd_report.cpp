// cmd_report.cpp — `salamander report RUN_DIR [--out FILE]`: (re)writes a run's HTML report (by
// default RUN_DIR/report.html); `salamander report --compare DIR DIR... --out FILE` puts several
// runs of one job side by side. Prints the path written.
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/options.h"
#include "report/report.h"

namespace sal::cli {

int cmd_report(const Command& cmd, const Parsed& p) {
  std::string out = p.get_or("--out", "");
  Status written;
  if (p.has("--compare")) {
    if (p.positional.size() < 2) return usage_error(cmd, "--compare needs at least two run directories");
    if (out.empty()) return usage_error(cmd, "--compare needs --out FILE");
    written = report::write_comparison(p.positional, out);
  } else {
    if (p.positional.size() != 1)
      return usage_error(cmd, "expected one run directory — usage: salamander " + cmd.synopsis);
    if (out.empty()) out = p.positional[0] + "/report.html";
    written = report::write_run_report(p.positional[0], out);
  }
  if (!written) {
    std::fprintf(stderr, "salamander report: %s\n", written.error().message().c_str());
    return 1;
  }
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace sal::cli
