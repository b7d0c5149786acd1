// kinds.cpp — names of the kinds and the dispatch to their tables.
#include "policy/kinds.h"

namespace sal::policy {

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::allocation: return "allocation";
    case Kind::placement: return "placement";
    case Kind::checkpoint: return "checkpoint";
    case Kind::redundancy: return "redundancy";
    case Kind::health: return "health";
  }
  return "?";
}

bool parse_kind(std::string_view s, Kind& out) {
  for (Kind k : kKinds)
    if (kind_name(k) == s) {
      out = k;
      return true;
    }
  return false;
}

const KindOps& ops_for(Kind k) {
  switch (k) {
    case Kind::allocation: return allocation_ops();
    case Kind::placement: return placement_ops();
    case Kind::checkpoint: return checkpoint_ops();
    case Kind::redundancy: return redundancy_ops();
    case Kind::health: return health_ops();
  }
  return allocation_ops();
}

}  // namespace sal::policy
