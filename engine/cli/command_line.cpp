// command_line.cpp — see command_line.h.
#include "cli/command_line.h"

#include <algorithm>
#include <cstdio>

#include "cli/common.h"
#include "core/strings.h"

namespace sal::cli {
namespace {

const char* const kTitle = "salamander — resilient, elastic Mixture-of-Experts training";
const char* const kExitCodes = "exit codes: 0 success, 1 failure, 2 usage error (a wrong option or argument)";

std::vector<std::string> words_of(const std::string& name) { return split(name, ' '); }

// The entry whose name is the longest prefix of `args` (in words), and how many words it took.
std::pair<const CommandDef*, size_t> find_command(const std::vector<std::string>& args) {
  const CommandDef* best = nullptr;
  size_t best_words = 0;
  for (const auto& def : command_table()) {
    auto words = words_of(def.spec.name);
    if (words.size() <= best_words || words.size() > args.size()) continue;
    if (std::equal(words.begin(), words.end(), args.begin())) best = &def, best_words = words.size();
  }
  return {best, best_words};
}

// The listed commands whose name starts with "<group> ".
std::vector<const CommandDef*> members_of(const std::string& group) {
  std::vector<const CommandDef*> out;
  for (const auto& def : command_table())
    if (!def.spec.hidden && def.spec.name.rfind(group + " ", 0) == 0) out.push_back(&def);
  return out;
}

std::string padded(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s + "  ";
}

std::string listing(const Command& c) { return c.name + (c.operands.empty() ? "" : " " + c.operands); }

std::string command_rows(const std::vector<const CommandDef*>& defs) {
  size_t width = 0;
  for (const auto* d : defs) width = std::max(width, listing(d->spec).size());
  width = std::min<size_t>(width, 30);
  std::string out;
  for (const auto* d : defs) out += "  " + padded(listing(d->spec), width) + d->spec.brief + "\n";
  return out;
}

std::vector<const CommandDef*> listed_commands() {
  std::vector<const CommandDef*> out;
  for (const auto& def : command_table())
    if (!def.spec.hidden) out.push_back(&def);
  return out;
}

// A command's usage, with its subcommands when other commands sit under its name (`sim`).
std::string usage_with_members(const Command& cmd) {
  std::string out = usage(cmd);
  auto members = members_of(cmd.name);
  if (!members.empty()) out += "\nsubcommands (salamander " + cmd.name + " SUBCOMMAND --help):\n" + command_rows(members);
  return out;
}

// Parses a command's options; --help prints its usage (exit 0), a bad option or a missing
// operand is a usage error (exit 2). Nothing is returned when the command is to end there.
std::optional<Parsed> parse_command(const Command& cmd, const std::vector<std::string>& args, int& exit_code) {
  auto p = parse(cmd, args);
  if (!p) {
    exit_code = usage_error(cmd, p.error().message());
    return std::nullopt;
  }
  if (p->has("--help")) {
    std::fputs(usage_with_members(cmd).c_str(), stdout);
    exit_code = 0;
    return std::nullopt;
  }
  if (p->positional.size() < cmd.min_positional) {
    std::fprintf(stderr, "salamander %s: missing %s\n\n%s", cmd.name.c_str(), cmd.operands.c_str(), usage(cmd).c_str());
    exit_code = 2;
    return std::nullopt;
  }
  return std::move(*p);
}

std::vector<std::string> command_words() {
  std::vector<std::string> out;
  for (const auto* d : listed_commands()) {
    auto first = words_of(d->spec.name)[0];
    if (std::find(out.begin(), out.end(), first) == out.end()) out.push_back(first);
  }
  return out;
}

// `salamander GROUP` with no command of its own under that word: its list, or an unknown subcommand.
int run_group(const std::string& group, const std::vector<std::string>& rest) {
  const bool asked = !rest.empty() && (rest[0] == "--help" || rest[0] == "-h" || rest[0] == "help");
  if (asked) return std::fputs(group_usage(group).c_str(), stdout), 0;
  if (rest.empty()) {
    std::fprintf(stderr, "salamander %s: missing SUBCOMMAND\n\n%s", group.c_str(), group_usage(group).c_str());
    return 2;
  }
  std::vector<std::string> subs;
  for (const auto* d : members_of(group)) subs.push_back(words_of(d->spec.name)[1]);
  std::fprintf(stderr, "salamander %s: unknown subcommand '%s'%s\n\n%s", group.c_str(), rest[0].c_str(),
               did_you_mean(rest[0], subs).c_str(), group_usage(group).c_str());
  return 2;
}

// Text for a Markdown table cell or paragraph: '|' would end the cell, '<' start an HTML tag. In a
// code span (`code`) only the '|'.
std::string markdown_text(const std::string& text, bool code = false) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '<' && !code) out += "&lt;";
    else if (c == '>' && !code) out += "&gt;";
    else out += c;
  }
  return out;
}

std::string markdown_options(const std::vector<OptSpec>& options) {
  std::string out = "| option | meaning |\n|---|---|\n";
  for (const auto& o : options)
    out += "| `" + markdown_text(o.name + (o.metavar.empty() ? "" : " " + o.metavar), true) + "` | " + markdown_text(o.help) +
           " |\n";
  return out;
}

}  // namespace

std::string top_level_help() {
  std::string out = std::string(kTitle) +
                    "\n\nusage: salamander <command> [options]      (salamander <command> --help for its options)\n\n"
                    "commands:\n" +
                    command_rows(listed_commands()) + "\noptions every command takes:\n";
  for (const auto& o : common_options())
    out += "  " + padded(o.name + (o.metavar.empty() ? "" : " " + o.metavar), 19) + o.help + "\n";
  return out + "\n" + kExitCodes + "\n";
}

std::string group_usage(const std::string& group) {
  return "usage: salamander " + group + " <subcommand> [options]   (salamander " + group +
         " <subcommand> --help for its options)\n\n" + command_rows(members_of(group));
}

std::string markdown_reference() {
  std::string out =
      "# Command-line reference\n\n"
      "Generated from the command table (engine/cli/command_table.cpp) by `salamander help --markdown`; "
      "t0310 fails when this page and the binary disagree.\n\n"
      "`salamander <command> --help` prints the same for one command. Exit codes: 0 success, 1 failure, 2 usage "
      "error (a wrong option or argument).\n\nEvery command also takes:\n\n" + markdown_options(common_options()) + "\n";
  for (const auto* d : listed_commands()) {
    const Command& c = d->spec;
    out += "## salamander " + c.name + "\n\n```\nsalamander " + c.synopsis + "\n```\n\n" + c.summary + "\n\n";
    if (!c.options.empty()) out += markdown_options(c.options) + "\n";
  }
  return out;
}

int cmd_help(const Command& cmd, const Parsed& p) {
  if (p.has("--markdown")) return std::fputs(markdown_reference().c_str(), stdout), 0;
  if (p.has("--list")) {
    for (const auto* d : listed_commands()) std::puts(d->spec.name.c_str());
    return 0;
  }
  if (p.positional.empty()) return std::fputs(top_level_help().c_str(), stdout), 0;
  auto [def, used] = find_command(p.positional);
  if (def && used == p.positional.size()) return std::fputs(usage_with_members(def->spec).c_str(), stdout), 0;
  if (!members_of(p.positional[0]).empty() && p.positional.size() == 1)
    return std::fputs(group_usage(p.positional[0]).c_str(), stdout), 0;
  return usage_error(cmd, "no command '" + join(p.positional, " ") + "' — salamander help lists them");
}

int cmd_version(const Command&, const Parsed&) {
#ifdef SAL_HAVE_CUDA
  const char* cuda = "CUDA path built";
#else
  const char* cuda = "CPU only (no CUDA path)";
#endif
  std::printf("salamander %s (%s)\n", SAL_VERSION, cuda);
  return 0;
}

int run_command_line(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(top_level_help().c_str(), stderr);
    return 2;
  }
  std::vector<std::string> line = args;
  if (line[0] == "--help" || line[0] == "-h") line[0] = "help";
  if (line[0] == "--version") line[0] = "version";
  auto [def, used] = find_command(line);
  if (!def && !members_of(line[0]).empty()) return run_group(line[0], {line.begin() + 1, line.end()});
  if (!def) {
    std::fprintf(stderr, "salamander: unknown command '%s'%s — salamander help lists them\n", line[0].c_str(),
                 did_you_mean(line[0], command_words()).c_str());
    return 2;
  }
  int code = 0;
  auto p = parse_command(def->spec, {line.begin() + long(used), line.end()}, code);
  if (!p) return code;
  return def->run(def->spec, *p);
}

}  // namespace sal::cli
