// main.cpp — `salamander`: one binary, one command per role. The commands are the table in
// command_table.cpp; `salamander help` lists them.
#include <string>
#include <vector>

#include "cli/command_line.h"

int main(int argc, char** argv) { return sal::cli::run_command_line(std::vector<std::string>(argv + 1, argv + argc)); }
