// json_text.h — a JSON value as text that never throws. nlohmann::json's dump() throws on a string
// that is not UTF-8, and the values we show come from outside (a drill's or scenario's Lua
// strings, a REPL chunk's results, a job file's text may hold any bytes): such bytes are written
// as U+FFFD instead.
#pragma once

#include <string>

namespace sal {

template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace sal
