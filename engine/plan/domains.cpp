// domains.cpp — see domains.h.
#include "plan/domains.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace sal::plan {
namespace {

// The (group, layer, expert) keys position `pos` holds, each once.
std::vector<uint64_t> keys_of(const Plan& p, uint32_t pos) {
  const uint64_t group = group_of(p, pos).group;
  std::vector<uint64_t> keys;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    if (pos >= p.layers[l].placement.size()) continue;
    std::set<ExpertId> seen(p.layers[l].placement[pos].begin(), p.layers[l].placement[pos].end());
    for (ExpertId e : seen) keys.push_back((group * p.layers.size() + l) * uint64_t(p.experts) + e);
  }
  return keys;
}

// Per (group, layer, expert), how many positions of each domain hold it.
class Census {
 public:
  explicit Census(uint32_t domains) : domains_(domains) {}
  uint64_t cost(const std::vector<uint64_t>& keys, uint32_t d) const {
    uint64_t c = 0;
    for (uint64_t k : keys)
      if (auto it = counts_.find(k); it != counts_.end()) c += it->second[d];
    return c;
  }
  void add(const std::vector<uint64_t>& keys, uint32_t d) {
    for (uint64_t k : keys) {
      auto& row = counts_[k];
      if (row.empty()) row.assign(domains_, 0);
      ++row[d];
    }
  }
  uint64_t pairs() const {
    uint64_t n = 0;
    for (const auto& [k, row] : counts_)
      for (uint32_t c : row) n += uint64_t(c) * (c - (c > 0)) / 2;
    return n;
  }

 private:
  uint32_t domains_;
  std::map<uint64_t, std::vector<uint32_t>> counts_;
};

// Data-parallel groups on domains (a grouped plan). A group is one copy of the model and its
// shard types are what SPARe's stacks mask: a domain lost takes every group it holds a position
// of, so each group should sit on as few domains as it can (splits), and groups that share a
// domain should host no shard type in common (conflicts: a type hosted only by groups of one
// domain dies with it).
class GroupCensus {
 public:
  GroupCensus(const Plan& p, uint32_t domains) : p_(p), in_(domains) {}
  bool holds(uint32_t d, uint32_t g) const { return in_[d].count(g) > 0; }
  // shard types group g has in common with the groups already in domain d (none if g is there)
  uint64_t conflicts(uint32_t d, uint32_t g) const {
    if (holds(d, g)) return 0;
    uint64_t c = 0;
    for (uint32_t h : in_[d]) c += shared_types(g, h);
    return c;
  }
  void add(uint32_t d, uint32_t g) { in_[d].insert(g); }
  // splits: positions of a group beyond its first domain; conflicts: types shared within domains
  std::pair<uint64_t, uint64_t> cost() const {
    std::map<uint32_t, uint64_t> domains_of;
    uint64_t conflicts = 0;
    for (const auto& groups : in_) {
      for (uint32_t g : groups) ++domains_of[g];
      for (auto a = groups.begin(); a != groups.end(); ++a)
        for (auto b = std::next(a); b != groups.end(); ++b) conflicts += shared_types(*a, *b);
    }
    uint64_t splits = 0;
    for (const auto& [g, n] : domains_of) splits += n - 1;
    return {splits, conflicts};
  }

 private:
  uint64_t shared_types(uint32_t a, uint32_t b) const {
    const auto& hosts = p_.stacks.hosts;
    if (a >= hosts.size() || b >= hosts.size()) return 0;
    uint64_t n = 0;
    for (uint32_t t : hosts[a]) n += std::count(hosts[b].begin(), hosts[b].end(), t);
    return n;
  }
  const Plan& p_;
  std::vector<std::set<uint32_t>> in_;
};

// One level of failure domains (hosts, or racks of hosts): what its domains hold so far. `of[d]`:
// the level's label of host d (the identity for hosts).
struct Level {
  Level(const Plan& p, std::vector<uint32_t> of_host, uint32_t count)
      : of(std::move(of_host)), replicas(count), groups(p, count) {}
  void add(const std::vector<uint64_t>& keys, uint32_t host, uint32_t group) {
    replicas.add(keys, of[host]);
    groups.add(of[host], group);
  }
  std::vector<uint32_t> of;
  Census replicas;
  GroupCensus groups;
};

std::vector<uint32_t> identity(uint32_t n) {
  std::vector<uint32_t> out(n);
  for (uint32_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

// Hosts, and racks when the hosts have them (else racks are the hosts again: the rack terms tie).
struct Levels {
  Levels(const Plan& p, uint32_t hosts, const std::vector<uint32_t>& racks)
      : host(p, identity(hosts), hosts),
        rack(p, racks.size() == hosts ? racks : identity(hosts), racks.size() == hosts ? domain_count(racks) : hosts) {}
  void add(const std::vector<uint64_t>& keys, uint32_t d, uint32_t group) {
    host.add(keys, d, group);
    rack.add(keys, d, group);
  }
  Level host, rack;
};

// What a deal costs, compared in order: group splits over hosts, shard types shared on a host, on a
// rack, replicas co-located on a rack, on a host.
struct DealCost {
  uint64_t splits = 0, conflicts = 0, rack_conflicts = 0, rack_colocated = 0, colocated = 0;
  auto operator<=>(const DealCost&) const = default;
};

DealCost deal_cost(const Plan& p, const std::vector<uint32_t>& labels, const std::vector<uint32_t>& racks) {
  Levels at(p, domain_count(labels), racks);
  for (uint32_t pos = 0; pos < p.nodes && pos < labels.size(); ++pos) at.add(keys_of(p, pos), labels[pos], group_of(p, pos).group);
  auto [splits, conflicts] = at.host.groups.cost();
  return {splits, conflicts, at.rack.groups.cost().second, at.rack.replicas.pairs(), at.host.replicas.pairs()};
}

// Where a group's next position goes when it starts on a domain: the smallest room that takes the
// rest of the group, else the largest room (best fit keeps whole domains for whole groups).
uint64_t fit_key(uint32_t room, uint32_t rest) {
  return room >= rest ? uint64_t(room) : (uint64_t(1) << 32) - room;
}

}  // namespace

uint32_t domain_count(const std::vector<uint32_t>& labels) {
  return labels.empty() ? 0 : *std::max_element(labels.begin(), labels.end()) + 1;
}

std::vector<uint32_t> domain_sizes(const std::vector<uint32_t>& labels) {
  std::vector<uint32_t> room(domain_count(labels), 0);
  for (uint32_t d : labels) ++room[d];
  return room;
}

std::vector<uint32_t> first_seen_labels(const std::vector<uint32_t>& ids) {
  std::map<uint32_t, uint32_t> label;
  std::vector<uint32_t> out;
  for (uint32_t id : ids) out.push_back(label.emplace(id, uint32_t(label.size())).first->second);
  return out;
}

bool shares_domains(const std::vector<uint32_t>& labels) {
  return std::set<uint32_t>(labels.begin(), labels.end()).size() < labels.size();
}

uint64_t colocated(const Plan& p, const std::vector<uint32_t>& labels) {
  Census census(domain_count(labels));
  for (uint32_t pos = 0; pos < p.nodes && pos < labels.size(); ++pos) census.add(keys_of(p, pos), labels[pos]);
  return census.pairs();
}

std::vector<uint32_t> deal_domains(const Plan& p, const std::vector<uint32_t>& labels_of_workers,
                                   const std::vector<uint32_t>* keep, const std::vector<uint32_t>& racks) {
  std::vector<uint32_t> room = domain_sizes(labels_of_workers);
  const uint32_t domains = uint32_t(room.size());
  Levels at(p, domains, racks);
  const bool grouped = group_count(p) > 1;
  std::vector<uint32_t> out;
  for (uint32_t pos = 0; pos < p.nodes; ++pos) {
    auto keys = keys_of(p, pos);
    const GroupSpan g = group_of(p, pos);
    const uint32_t rest = g.first + g.count - pos;  // this group's positions still to deal
    // in order: (grouped plans) stay on a host of this group, share no shard type on the host, on
    // its rack, best fit; then the fewest replicas of the same experts on the rack, on the host;
    // then the most room; then the lowest label
    auto key = [&](uint32_t d) {
      const bool joins = grouped && !at.host.groups.holds(d, g.group);
      const uint32_t r = at.rack.of[d];
      return std::tuple(uint64_t(joins), grouped ? at.host.groups.conflicts(d, g.group) : 0,
                        grouped ? at.rack.groups.conflicts(r, g.group) : 0, joins ? fit_key(room[d], rest) : 0,
                        at.rack.replicas.cost(keys, r), at.host.replicas.cost(keys, d), ~uint64_t(room[d]));
    };
    uint32_t best = domains;
    for (uint32_t d = 0; d < domains; ++d)
      if (room[d] > 0 && (best == domains || key(d) < key(best))) best = d;
    if (best == domains) return {};  // fewer workers than positions: the caller asked wrongly
    --room[best];
    at.add(keys, best, g.group);
    out.push_back(best);
  }
  if (keep && keep->size() == out.size() && domain_sizes(*keep) == domain_sizes(labels_of_workers) &&
      deal_cost(p, *keep, racks) <= deal_cost(p, out, racks))
    return *keep;
  return out;
}

std::vector<std::vector<ExpertId>> fold_onto_domains(const LayerPlan& layer, const std::vector<uint32_t>& labels) {
  std::vector<std::vector<ExpertId>> out(domain_count(labels));
  for (size_t pos = 0; pos < layer.placement.size() && pos < labels.size(); ++pos)
    out[labels[pos]].insert(out[labels[pos]].end(), layer.placement[pos].begin(), layer.placement[pos].end());
  return out;
}

std::string on_hosts(const Plan& p) {
  if (p.domains.empty()) return "";
  const uint32_t n = domain_count(p.domains), r = domain_count(p.racks);
  return " on " + std::to_string(n) + (n == 1 ? " host" : " hosts") +
         (r ? " in " + std::to_string(r) + (r == 1 ? " rack" : " racks") : "");
}

Status check_domains(const Plan& p) {
  if (p.domains.empty()) {
    if (!p.racks.empty()) return fail("plan: racks without domains (racks label each domain)");
    return {};
  }
  if (p.domains.size() != p.nodes)
    return fail("plan: domains has ", p.domains.size(), " labels for ", p.nodes, " positions");
  std::vector<uint32_t> room = domain_sizes(p.domains);
  for (uint32_t d = 0; d < room.size(); ++d)
    if (room[d] == 0) return fail("plan: domain ", d, " has no position (labels must be 0..D-1, each used)");
  if (p.racks.empty()) return {};
  if (p.racks.size() != room.size())
    return fail("plan: racks has ", p.racks.size(), " labels for ", room.size(), " domains");
  std::vector<uint32_t> hosts = domain_sizes(p.racks);
  for (uint32_t r = 0; r < hosts.size(); ++r)
    if (hosts[r] == 0) return fail("plan: rack ", r, " has no domain (labels must be 0..R-1, each used)");
  return {};
}

std::vector<uint32_t> rack_of_positions(const Plan& p) {
  if (p.racks.empty() || p.domains.empty()) return {};
  std::vector<uint32_t> out;
  for (uint32_t d : p.domains) out.push_back(d < p.racks.size() ? p.racks[d] : 0);
  return out;
}

}  // namespace sal::plan
