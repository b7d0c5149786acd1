// bench_strlib.cpp — what the bounded string library (lua/strlib.h) costs on ordinary work, beside
// LuaJIT's own functions as the peer: the same Lua chunk, timed in a state with the stock library
// and in one with the bounded one (both JIT off, as every sandbox is). Work: finding words and
// key = value pairs in text, gsub with a template and a function, gmatch over a log, a plain find
// in a long string, and sorting numbers, strings and with a Lua comparator. Prints a markdown table
// of the best of `runs` runs (ms) and the ratio.
//
// usage: bench_strlib [runs = 7]
#include <lua.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/clock.h"
#include "lua/strlib.h"

using namespace sal;

namespace {

struct Work {
  const char* name;
  const char* setup;  // run once, untimed
  const char* timed;
};

const Work kWork[] = {
    {"find words", "text = ('the quick brown fox jumps over the lazy dog '):rep(2000)",
     "local n = 0 for i = 1, 20 do for w in text:gmatch('%a+') do n = n + #w end end"},
    {"match key = value", "lines = {} for i = 1, 20000 do lines[i] = 'key' .. i .. ' = value' .. i end",
     "local n = 0 for _, l in ipairs(lines) do local k, v = l:match('^(%w+)%s*=%s*(%w+)$') n = n + #k end"},
    {"gsub template", "text = ('alpha beta gamma delta '):rep(5000)",
     "for i = 1, 10 do local s = text:gsub('(%a+) (%a+)', '%2 %1') end"},
    {"gsub function", "text = ('x=1, y=22, z=333; '):rep(3000)",
     "for i = 1, 5 do local s = text:gsub('%d+', function(d) return #d end) end"},
    {"plain find", "hay = ('ab'):rep(500000) .. 'needle'", "for i = 1, 50 do local a = hay:find('needle', 1, true) end"},
    {"find with a pattern", "hay = ('ab'):rep(200000) .. 'x=42'", "for i = 1, 10 do local a = hay:find('x=(%d+)') end"},
    {"sort numbers", "base = {} for i = 1, 200000 do base[i] = (i * 7919) % 200000 end",
     "local t = {} for i = 1, #base do t[i] = base[i] end table.sort(t)"},
    {"sort strings", "base = {} for i = 1, 50000 do base[i] = tostring((i * 7919) % 50000) end",
     "local t = {} for i = 1, #base do t[i] = base[i] end table.sort(t)"},
    {"sort with a Lua comparator", "base = {} for i = 1, 50000 do base[i] = (i * 7919) % 50000 end",
     "local t = {} for i = 1, #base do t[i] = base[i] end table.sort(t, function(a, b) return a > b end)"},
};

void run(lua_State* L, const char* code) {
  if (luaL_loadstring(L, code) != 0 || lua_pcall(L, 0, 0, 0) != 0) {
    std::fprintf(stderr, "bench_strlib: %s\n", lua_tostring(L, -1));
    std::exit(1);
  }
}

// Best of `runs` timings of w.timed in a fresh state (stock or bounded library), in ms.
double best_ms(const Work& w, bool bounded, int runs) {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  if (bounded) lua::install_bounded_library(L);
  run(L, w.setup);
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    int64_t t0 = mono_ns();
    run(L, w.timed);
    best = std::min(best, double(mono_ns() - t0) / 1e6);
  }
  lua_close(L);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  std::printf("| work (best of %d) | LuaJIT's library ms | bounded library ms | ratio |\n", runs);
  std::printf("| --- | ---: | ---: | ---: |\n");
  for (const auto& w : kWork) {
    double stock = best_ms(w, false, runs), ours = best_ms(w, true, runs);
    std::printf("| %s | %.2f | %.2f | %.2f |\n", w.name, stock, ours, ours / stock);
  }
  return 0;
}
