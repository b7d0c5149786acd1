// commands.h — the `salamander` commands: each is a definition (name, operands, synopsis, summary,
// options — one table of them all, command_table.cpp) and a handler that runs it. The dispatcher
// (command_line.h) parses a command's options by its definition before calling the handler, so
// handlers see only arguments their definition allows; each returns the process exit code:
// 0 success, 1 failure, 2 usage error.
#pragma once

#include <string>
#include <vector>

#include "cli/options.h"

namespace sal::cli {

using Handler = int (*)(const Command& cmd, const Parsed& p);

struct CommandDef {
  Command spec;
  Handler run;
};

// Every command, in the order `salamander help` lists them.
const std::vector<CommandDef>& command_table();

int cmd_run(const Command& cmd, const Parsed& p);
int cmd_controller(const Command& cmd, const Parsed& p);
int cmd_agent(const Command& cmd, const Parsed& p);
int cmd_worker(const Command& cmd, const Parsed& p);
int cmd_repl(const Command& cmd, const Parsed& p);
int job_check(const Command& cmd, const Parsed& p);
int job_schema(const Command& cmd, const Parsed& p);
int policy_check(const Command& cmd, const Parsed& p);
int policy_plan(const Command& cmd, const Parsed& p);
int policy_recovery(const Command& cmd, const Parsed& p);
int policy_spare(const Command& cmd, const Parsed& p);
int policy_window(const Command& cmd, const Parsed& p);
int cmd_sample(const Command& cmd, const Parsed& p);
int cmd_export(const Command& cmd, const Parsed& p);
int cmd_import(const Command& cmd, const Parsed& p);
int cmd_data_prepare(const Command& cmd, const Parsed& p);
int cmd_report(const Command& cmd, const Parsed& p);
int sim_scenario(const Command& cmd, const Parsed& p);
int sim_fit(const Command& cmd, const Parsed& p);
int sim_stacks(const Command& cmd, const Parsed& p);
int sim_ettr(const Command& cmd, const Parsed& p);
int sim_spare(const Command& cmd, const Parsed& p);
int cmd_keygen(const Command& cmd, const Parsed& p);
int cmd_help(const Command& cmd, const Parsed& p);     // command_line.cpp
int cmd_version(const Command& cmd, const Parsed& p);  // command_line.cpp

}  // namespace sal::cli
