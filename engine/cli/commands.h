// commands.h — the `salamander` subcommands. Each takes its arguments (without the subcommand
// name) and returns the process exit code: 0 success, 1 failure, 2 usage error.
#pragma once

#include <string>
#include <vector>

namespace sal::cli {

using Args = std::vector<std::string>;

int cmd_run(const Args& args);
int cmd_controller(const Args& args);
int cmd_agent(const Args& args);
int cmd_worker(const Args& args);
int cmd_repl(const Args& args);
int cmd_job(const Args& args);
int cmd_keygen(const Args& args);
int cmd_policy(const Args& args);
int cmd_sample(const Args& args);
int cmd_export(const Args& args);
int cmd_sim(const Args& args);
int cmd_report(const Args& args);

}  // namespace sal::cli
