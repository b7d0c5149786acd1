// registry.cpp — see registry.h.
#include "lua/registry.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace sal::lua {
namespace {

// upvalue 1: the entry, upvalue 2: the registry.
int trampoline(lua_State* L) {
  const auto* e = static_cast<const ApiEntry*>(lua_touserdata(L, lua_upvalueindex(1)));
  const auto* reg = static_cast<const ApiRegistry*>(lua_touserdata(L, lua_upvalueindex(2)));
  try {
    if (e->role != Role::observe && reg->on_acting_call) reg->on_acting_call(L, *e);
    return e->fn(L);
  } catch (const std::exception& ex) {
    // Raised after the catch block ends, so no C++ exception is live while Lua unwinds.
    lua_pushfstring(L, "%s: %s", e->qualified().c_str(), ex.what());
  }
  return lua_error(L);
}

std::string first_line(const std::string& s) {
  auto p = s.find('\n');
  return p == std::string::npos ? s : s.substr(0, p);
}

bool visible(const ApiEntry& e, Role role) { return int(e.role) <= int(role); }

// A function above the session's role: upvalue 1 the entry, upvalue 2 the session's role.
int refused(lua_State* L) {
  const auto* e = static_cast<const ApiEntry*>(lua_touserdata(L, lua_upvalueindex(1)));
  Role role = Role(lua_tointeger(L, lua_upvalueindex(2)));
  std::string who = Sandbox::identity(L);
  return luaL_error(L, "%s needs role %s; %s has role %s", e->qualified().c_str(),
                    std::string(role_name(e->role)).c_str(), who.empty() ? "this session" : who.c_str(),
                    std::string(role_name(role)).c_str());
}

// Pushes the closure a session of `role` calls for entry e.
void push_entry(lua_State* L, const ApiRegistry& reg, const ApiEntry& e, Role role) {
  lua_pushlightuserdata(L, const_cast<ApiEntry*>(&e));
  if (visible(e, role)) {
    lua_pushlightuserdata(L, const_cast<ApiRegistry*>(&reg));
    lua_pushcclosure(L, trampoline, 2);
  } else {
    lua_pushinteger(L, int(role));
    lua_pushcclosure(L, refused, 2);
  }
}

int help_fn(lua_State* L) {
  const auto* reg = static_cast<const ApiRegistry*>(lua_touserdata(L, lua_upvalueindex(1)));
  Role role = Role(lua_tointeger(L, lua_upvalueindex(2)));
  std::string topic;
  if (lua_type(L, 1) == LUA_TSTRING) {
    topic = lua_tostring(L, 1);
  } else if (lua_type(L, 1) == LUA_TFUNCTION) {
    // help(job.nodes): find the entry whose closure this is
    for (const auto& e : reg->entries()) {
      if (e.module.empty()) {
        lua_getglobal(L, e.name.c_str());
      } else {
        lua_getglobal(L, e.module.c_str());
        if (lua_istable(L, -1)) lua_getfield(L, -1, e.name.c_str());
        else lua_pushnil(L);
        lua_remove(L, -2);
      }
      bool same = lua_rawequal(L, -1, 1);
      lua_pop(L, 1);
      if (same) {
        topic = e.qualified();
        break;
      }
    }
  } else if (lua_istable(L, 1)) {
    for (const auto& e : reg->entries()) {
      if (e.module.empty()) continue;
      lua_getglobal(L, e.module.c_str());
      bool same = lua_rawequal(L, -1, 1);
      lua_pop(L, 1);
      if (same) {
        topic = e.module;
        break;
      }
    }
  }
  std::string text = reg->help(topic, role);
  lua_getglobal(L, "print");  // help prints (to the session) rather than returning a string
  lua_pushlstring(L, text.data(), text.size());
  lua_call(L, 1, 0);
  return 0;
}

}  // namespace

void ApiRegistry::add_module(const std::string& name, const std::string& doc) {
  modules_.push_back({name, doc});
}

void ApiRegistry::add(ApiEntry entry) { entries_.push_back(std::move(entry)); }

void ApiRegistry::install(Sandbox& sb, Role role) const {
  lua_State* L = sb.L();
  for (const auto& m : modules_) {
    lua_newtable(L);
    for (const auto& e : entries_) {
      if (e.module != m.name) continue;
      push_entry(L, *this, e, role);
      lua_setfield(L, -2, e.name.c_str());
    }
    Sandbox::make_readonly(L, m.name);
    sb.set_global(m.name.c_str());
  }
  for (const auto& e : entries_) {  // module-less functions become globals
    if (!e.module.empty()) continue;
    push_entry(L, *this, e, role);
    sb.set_global(e.name.c_str());
  }
  lua_pushlightuserdata(L, const_cast<ApiRegistry*>(this));
  lua_pushinteger(L, int(role));
  lua_pushcclosure(L, help_fn, 2);
  sb.set_global("help");
}

std::string ApiRegistry::help(const std::string& topic, Role role) const {
  std::string out;
  if (topic.empty()) {
    out += "Salamander controller API (your role: " + std::string(role_name(role)) + ")\n";
    for (const auto& m : modules_) {
      out += "\n" + m.name + " — " + first_line(m.doc) + "\n";
      for (const auto& e : entries_)
        if (e.module == m.name && visible(e, role))
          out += "  " + e.signature + "\n      " + first_line(e.doc) + "\n";
    }
    out += "\nhelp(\"job.nodes\") or help(job.nodes) for one function; Tab completes names.";
    return out;
  }
  for (const auto& m : modules_) {
    if (m.name != topic) continue;
    out += m.name + " — " + m.doc + "\n";
    for (const auto& e : entries_)
      if (e.module == m.name && visible(e, role)) out += "  " + e.signature + "\n";
    return out;
  }
  for (const auto& e : entries_) {
    if (e.qualified() != topic) continue;
    if (!visible(e, role))
      return e.qualified() + " needs role " + std::string(role_name(e.role)) + "; yours is " +
             std::string(role_name(role));
    return e.signature + "\n\n" + e.doc + "\n(role: " + std::string(role_name(e.role)) + ")";
  }
  return "no help for '" + topic + "' — help() lists everything";
}

std::string ApiRegistry::completion_word(const std::string& line) {
  // The trailing run of identifier characters and dots.
  size_t start = line.size();
  while (start > 0) {
    char c = line[start - 1];
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') {
      --start;
    } else {
      break;
    }
  }
  return line.substr(start);
}

std::vector<std::string> ApiRegistry::complete(const std::string& line, Role role,
                                               const std::vector<std::string>& globals) const {
  if (line.size() > kMaxCompletionLine) return {};
  std::string word = completion_word(line);
  std::string head = line.substr(0, line.size() - word.size());
  std::set<std::string> out;
  auto dot = word.rfind('.');
  if (dot == std::string::npos) {
    auto consider = [&](const std::string& name, const char* suffix) {
      if (out.size() < kMaxCompletions && name.rfind(word, 0) == 0) out.insert(head + name + suffix);
    };
    for (const auto& m : modules_) consider(m.name, ".");
    for (const auto& e : entries_)
      if (e.module.empty() && visible(e, role)) consider(e.name, "(");
    consider("help", "(");
    for (const auto& g : globals) {
      bool is_module = std::any_of(modules_.begin(), modules_.end(),
                                   [&](const ModuleDoc& m) { return m.name == g; });
      if (!is_module && g != "help") consider(g, "");
    }
  } else {
    std::string mod = word.substr(0, dot);
    std::string prefix = word.substr(dot + 1);
    for (const auto& e : entries_)
      if (e.module == mod && visible(e, role) && e.name.rfind(prefix, 0) == 0)
        out.insert(head + mod + "." + e.name + "(");
  }
  return {out.begin(), out.end()};
}

}  // namespace sal::lua
