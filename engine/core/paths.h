// paths.h — where things are on this machine: the running executable (so a process can spawn its
// own subcommands), and a private runtime directory (0700) for sockets and endpoint files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace sal {

// Absolute path of the running executable (/proc/self/exe).
Result<std::string> self_exe();

// What to execute to start this same program again (its agents, workers, controller): its path,
// or /proc/self/exe where that file was replaced or removed since it started (a rebuild, an
// upgrade under a running job), so that a node started later runs the code the job runs.
std::string self_spawn_exe();

// $XDG_RUNTIME_DIR/salamander or /tmp/salamander-<uid>, created with mode 0700 if missing.
Result<std::string> runtime_dir();

// mkdir -p with the given mode for created directories.
Status make_dirs(const std::string& path, unsigned mode = 0755);

Result<std::string> read_file(const std::string& path, size_t max_bytes = 64u << 20);
// Whole or not at all: written to a temporary name of this writer's own, then renamed over `path`.
Status write_file(const std::string& path, const std::string& contents, unsigned mode = 0644);
// The same for a file made of `parts` one after another, each written from where it lies (a
// snapshot's gigabytes go to the file without first being gathered into one string).
Status write_file(const std::string& path, const std::vector<std::string_view>& parts, unsigned mode = 0644);

// This machine's host name.
std::string hostname();

// Directory part of a path ("a/b/c.lua" -> "a/b", "c.lua" -> ".").
std::string dir_name(const std::string& path);

// The path made absolute against the working directory (not resolving links; "." -> the cwd).
std::string absolute_path(const std::string& path);

bool path_exists(const std::string& path);

}  // namespace sal
