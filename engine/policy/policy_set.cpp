// policy_set.cpp — see policy_set.h.
#include "policy/policy_set.h"

#include "core/paths.h"
#include "policy/library.h"

namespace sal::policy {

PolicySet::PolicySet(PolicyOptions opts) : opts_(std::move(opts)), resolver_(opts_.search_dirs) {
  env_.budget_ms = opts_.budget_ms;
  env_.memory_limit = opts_.memory_limit;
  env_.install_library = install_library;
  env_.service = opts_.service;
  env_.load_lib = [this](const std::string& name) { return resolver_.library(name); };
  for (Kind k : kKinds) {
    slots_[size_t(k)] = std::make_unique<Slot>(k, env_);
    slots_[size_t(k)]->on_event = [this, k](const SlotEvent& e) {
      if (on_event) on_event(k, e);
    };
    slots_[size_t(k)]->on_decision = [this, k](const Decision& d) {
      if (on_decision) on_decision(k, d);
    };
    slots_[size_t(k)]->reread = [this](const Source& s) { return resolver_.reread(s); };
  }
}

Status PolicySet::load(Kind k, const std::string& what, const std::string& who) {
  auto src = resolver_.resolve(k, what);
  if (!src) return src.error();
  return slot(k).load(*src, who);
}

Result<DiffReport> PolicySet::diff(Kind k, const std::string& what) {
  auto src = resolver_.resolve(k, what);
  if (!src) return src.error();
  return slot(k).diff(*src);
}

Result<std::unique_ptr<Generation>> PolicySet::check(Kind k, const std::string& what) const {
  auto src = resolver_.resolve(k, what);
  if (!src) return src.error();
  auto g = Generation::load(k, *src, env_);
  if (!g) return g.error().with_context("load");
  if (auto s = (*g)->selftest(); !s) return s.error();
  return g;
}

Result<std::unique_ptr<Generation>> check_file(const std::string& path, const PolicyOptions& opts) {
  auto text = read_file(path, 1u << 20);
  if (!text) return text.error();
  // The kind is read from the text's own `kind = "..."` by trying each slot kind in turn: the
  // shape check names the mismatch, so the right one is the only one that loads.
  PolicySet set(opts);
  Error last("no kind matched");
  for (Kind k : kKinds) {
    if (text->find("\"" + std::string(kind_name(k)) + "\"") == std::string::npos &&
        text->find("'" + std::string(kind_name(k)) + "'") == std::string::npos)
      continue;
    auto g = set.check(k, path);
    if (g) return g;
    last = g.error();
    if (last.message().find("but this is the") == std::string::npos) return last;
  }
  return Error(path + ": " + last.message());
}

}  // namespace sal::policy
