// targets.h — the fuzz targets: one function per decoder or parser that takes input from outside
// (a peer's bytes, a file an operator writes, a line typed at the REPL). Each takes any bytes and
// must return 0 without crashing, hanging or leaking; what it checks beyond that is in its file.
//
// Built two ways (tests/CMakeLists.txt): with clang and libFuzzer (-DSAL_FUZZ=ON), one fuzzer
// program per target (libfuzzer_main.cpp); and in every build, test_fuzz_corpus, which runs the
// corpus in tests/fuzz/corpus/<target>/ — the seeds and every input a fuzzer found interesting,
// crashes included once fixed — through the same functions as unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sal::fuzz {

int wire(const uint8_t* data, size_t size);      // control messages: wire::open + every decoder
int store(const uint8_t* data, size_t size);     // rendezvous store requests and replies
int job(const uint8_t* data, size_t size);       // job files (Lua in a sandbox, then the schema)
int drill(const uint8_t* data, size_t size);     // drill scripts
int trace(const uint8_t* data, size_t size);     // spot traces (Bamboo format)
int plan(const uint8_t* data, size_t size);      // plan files (JSON)
int loads(const uint8_t* data, size_t size);     // load files (CSV and SmartMoE)
int scenario(const uint8_t* data, size_t size);  // simulator scenarios (as JSON)
int keys(const uint8_t* data, size_t size);      // CURVE key files and allowlists
int repl(const uint8_t* data, size_t size);      // REPL input: a chunk, run in a session's sandbox
int pattern(const uint8_t* data, size_t size);   // Lua patterns: the bounded matcher against LuaJIT's
int proposal(const uint8_t* data, size_t size);  // policy proposals built with metatables, shared and cyclic tables

struct Target {
  const char* name;
  int (*fn)(const uint8_t*, size_t);
};
inline constexpr Target kTargets[] = {
    {"wire", wire},   {"store", store}, {"job", job},           {"drill", drill}, {"trace", trace},     {"plan", plan},
    {"loads", loads}, {"keys", keys},   {"scenario", scenario}, {"repl", repl},   {"pattern", pattern},
    {"proposal", proposal},
};

inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace sal::fuzz
