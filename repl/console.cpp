// console.cpp — see console.h. Lines starting with a backslash are client commands, in the prompt and
// with -e alike: they read a file on the client's machine and send its text.
#include "repl/console.h"

#include <editline/readline.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace sal::repl {
namespace {

constexpr int kHistoryLines = 1000;

Client* g_client = nullptr;  // for the completion callback (libedit has no user pointer)
std::vector<std::string> g_matches;

char* completion_generator(const char*, int state) {
  static size_t next;
  if (state == 0) next = 0;
  if (next >= g_matches.size()) return nullptr;
  return strdup(g_matches[next++].c_str());
}

char** complete_line(const char* text, int, int end) {
  rl_attempted_completion_over = 1;
  g_matches.clear();
  if (!g_client) return nullptr;
  std::string line(rl_line_buffer, size_t(end));
  auto r = g_client->complete(line);
  if (!r) return nullptr;
  // libedit replaces only the word being completed (`text`): strip what precedes it.
  size_t prefix = line.size() - std::strlen(text);
  for (const auto& c : *r)
    if (c.size() >= prefix) g_matches.push_back(c.substr(prefix));
  return rl_completion_matches(text, completion_generator);
}

std::string history_path() {
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.salamander_history" : "";
}

bool print_result(const wire::ReplResult& r, bool json, bool tty) {
  if (!r.output.empty()) std::fputs(r.output.c_str(), json ? stderr : stdout);
  if (!r.ok) {
    std::fprintf(stderr, tty ? "\033[31merror:\033[0m %s\n" : "error: %s\n", r.error.c_str());
    return false;
  }
  if (json) {
    auto arr = nlohmann::ordered_json::parse(r.value.empty() ? "[]" : r.value, nullptr, false);
    if (arr.is_discarded()) {
      std::puts(r.value.c_str());
    } else if (arr.size() == 1) {
      std::puts(arr[0].dump(2).c_str());
    } else if (arr.empty()) {
      std::puts("null");
    } else {
      std::puts(arr.dump(2).c_str());
    }
  } else if (!r.value.empty()) {
    std::puts(r.value.c_str());
  }
  std::fflush(stdout);
  return true;
}

// A Lua long string holding `text` exactly: [==[...]==] with enough '=' to be unambiguous.
std::string long_string(const std::string& text) {
  std::string eq;
  while (text.find("]" + eq + "]") != std::string::npos) eq += "=";
  return "[" + eq + "[\n" + text + "]" + eq + "]";
}

const char* kMetaHelp =
    "client commands (read files on this machine, not the controller's):\n"
    "  \\load SLOT FILE   policy.load(SLOT, <contents of FILE>, FILE)\n"
    "  \\diff SLOT FILE   policy.diff(SLOT, <contents of FILE>, FILE)\n"
    "  \\help             this list\n";

// Turns a client command ("\load placement mine.lua") into the chunk to send, or explains why not.
Result<std::string> meta_command(const std::string& line) {
  std::istringstream in(line.substr(1));
  std::string verb, slot, file;
  in >> verb >> slot >> file;
  if (verb == "help") return std::string();
  if (verb != "load" && verb != "diff") return fail("unknown client command '\\", verb, "' (\\help lists them)");
  if (slot.empty() || file.empty()) return fail("usage: \\", verb, " SLOT FILE");
  std::ifstream f(file, std::ios::binary);
  if (!f) return fail("cannot read ", file);
  std::stringstream ss;
  ss << f.rdbuf();
  // The file's name goes with its text: the policy's errors say file:line.
  return "return policy." + verb + "(\"" + slot + "\", " + long_string(ss.str()) + ", " + long_string(file) + ")";
}

// The chunk a line stands for: a client command's (\load, \diff) or the line itself; empty with
// nothing to send (\help, printed here); an error for a client command that cannot be carried out.
Result<std::string> chunk_of(const std::string& line) {
  if (line.empty() || line[0] != '\\') return line;
  auto meta = meta_command(line);
  if (meta && meta->empty()) std::fputs(kMetaHelp, stdout);
  return meta;
}

int one_shot(Client& c, const ConsoleOptions& o) {
  auto chunk = chunk_of(o.eval);
  if (!chunk) {
    std::fprintf(stderr, "salamander repl: %s\n", chunk.error().message().c_str());
    return 1;
  }
  if (chunk->empty()) return 0;
  auto r = c.eval(*chunk, o.json ? wire::ValueFormat::json : wire::ValueFormat::text);
  if (!r) {
    std::fprintf(stderr, "salamander repl: %s\n", r.error().message().c_str());
    return 2;
  }
  return print_result(*r, o.json, false) ? 0 : 1;
}

// Reads one chunk (several lines while it is incomplete); false at end of input.
bool read_chunk(bool tty, const std::string& prompt, std::string& chunk) {
  chunk.clear();
  for (;;) {
    std::string line;
    if (tty) {
      char* raw = readline(chunk.empty() ? prompt.c_str() : "  >> ");
      if (!raw) return !chunk.empty();
      line = raw;
      std::free(raw);
    } else if (!std::getline(std::cin, line)) {
      return !chunk.empty();
    }
    chunk += chunk.empty() ? line : "\n" + line;
    if (chunk.find_first_not_of(" \t") == std::string::npos || chunk[0] == '\\') return true;
    if (check_chunk(chunk) != ChunkState::incomplete) return true;
  }
}

int interactive(Client& c, const wire::ReplWelcome& w) {
  bool tty = isatty(0);
  std::string hist = history_path();
  if (tty) {
    using_history();
    stifle_history(kHistoryLines);
    if (!hist.empty()) read_history(hist.c_str());
    g_client = &c;
    rl_attempted_completion_function = complete_line;
    rl_completion_append_character = '\0';
    std::printf("connected to job '%s' (session %llu, role %s, budget %u ms). help() lists the API; Ctrl-D quits.\n",
                w.job.c_str(), (unsigned long long)w.session, w.role.c_str(), w.budget_ms);
  }
  std::string prompt = "sal:" + w.job + "> ";
  std::string chunk;
  int last = 0;
  while (read_chunk(tty, prompt, chunk)) {
    if (chunk.find_first_not_of(" \t\n") == std::string::npos) continue;
    if (tty) add_history(chunk.c_str());
    auto sent = chunk_of(chunk);
    if (!sent) {
      std::fprintf(stderr, "%s\n", sent.error().message().c_str());
      continue;
    }
    if (sent->empty()) continue;
    auto r = c.eval(*sent);
    if (!r) {
      std::fprintf(stderr, "salamander repl: %s\n", r.error().message().c_str());
      last = 2;
      continue;
    }
    last = print_result(*r, false, tty) ? 0 : 1;
  }
  if (tty && !hist.empty()) write_history(hist.c_str());
  c.bye();
  g_client = nullptr;
  return tty ? 0 : last;
}

}  // namespace

int run_console(const ConsoleOptions& o) {
  Client c(o.client);
  auto w = c.connect();
  if (!w) {
    std::fprintf(stderr, "salamander repl: %s\n", w.error().message().c_str());
    return 2;
  }
  if (!o.eval.empty()) {
    int rc = one_shot(c, o);
    c.bye();
    return rc;
  }
  return interactive(c, *w);
}

}  // namespace sal::repl
