// repl_eval.h — a REPL chunk's evaluation, off the controller's loop.
//
// Each evaluation runs on a thread of its own (one per busy session, at a lower CPU priority than
// the loop and the workers) over the session's own Lua state, which no other thread touches while
// it runs. So whatever the chunk does — a loop, an exponential pattern, a long sort — the loop goes
// on serving heartbeats, votes, commits and the other sessions, and the chunk is stopped at its
// budget (the instruction hook, and the bounded string library for long C calls: lua/strlib.h).
//
// The controller API reaches controller state only on the loop thread: a registered function's
// body runs there through call_on_loop(), with the session's Lua stack, while the evaluation
// thread waits (the state is still used by one thread at a time). Functions that do long work of
// their own (policy.decide, policy.diff) take what they need from the loop with run_on_loop() and
// do the work on the evaluation thread.
#pragma once

#include <lua.hpp>

#include <functional>
#include <string>

#include "lua/sandbox.h"
#include "wire/messages.h"

namespace sal::console {

class LoopCalls;

// Makes `calls` the way this thread reaches the loop (set by an evaluation thread for its life;
// nullptr on the loop thread, where calls run inline).
void set_thread_loop_calls(LoopCalls* calls);

// Runs fn on the loop thread (inline when already there); false when the controller is stopping.
bool run_on_loop(const std::function<void()>& fn);

// Runs a registered function's body — which reads its arguments from L, pushes its results and
// may raise Lua errors — on the loop thread; returns its result count, or raises its error here.
int call_on_loop(lua_State* L, const std::function<int(lua_State*)>& body);

// Loads and runs one chunk (as an expression first, then as statements), then renders its values
// as text or JSON. `output` collects print() meanwhile. Runs on the evaluation thread.
wire::ReplResult evaluate(lua::Sandbox& sb, std::string& output, const wire::ReplEval& req, const lua::Budget& budget);

}  // namespace sal::console
