// test_domains.cpp — failure domains (issue 40): a plan's positions dealt onto hosts so that no
// host holds two replicas of an expert when the hosts allow it, the plan in force's deal kept when it
// is as good, the remap keeping each position on a worker of its host, and domains in plan files.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <set>

#include "plan/domains.h"
#include "plan/remap.h"
#include "plan/layer_plan.h"

using namespace sal;
using namespace sal::plan;
using sal::plan::test::one_layer;

namespace {

// MRO's blocks: positions 2i and 2i+1 hold the same two experts (what a worker-level placement of
// 8 experts x 2 replicas over 8 workers of 2 slots gives).
Plan blocks() { return one_layer({{0, 1}, {0, 1}, {2, 3}, {2, 3}, {4, 5}, {4, 5}, {6, 7}, {6, 7}}, 8); }

// Whether every expert of every layer is on at least two domains.
bool every_expert_on_two(const Plan& p, const std::vector<uint32_t>& labels) {
  for (const auto& l : p.layers) {
    auto folded = fold_onto_domains(l, labels);
    for (ExpertId e = 0; e < p.experts; ++e) {
      int hosts = 0;
      for (const auto& d : folded) hosts += std::count(d.begin(), d.end(), e) > 0;
      if (hosts < 2) return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("labels of hosts come in the order the hosts first appear") {
  CHECK(first_seen_labels({7, 7, 3, 3, 9}) == std::vector<uint32_t>{0, 0, 1, 1, 2});
  CHECK(shares_domains({0, 0, 1}));
  CHECK_FALSE(shares_domains({0, 1, 2}));
}

TEST_CASE("a host of two workers never holds both replicas of an expert when four hosts can spread them") {
  Plan p = blocks();
  std::vector<uint32_t> workers = {0, 0, 1, 1, 2, 2, 3, 3};  // 4 hosts x 2 workers
  // the positions in order, two by two: each host would hold both replicas of its two experts
  CHECK(colocated(p, workers) == 8);
  CHECK_FALSE(every_expert_on_two(p, workers));
  auto labels = deal_domains(p, workers);
  REQUIRE(labels.size() == 8);
  CHECK(colocated(p, labels) == 0);
  CHECK(every_expert_on_two(p, labels));
  // as many positions per host as the host has workers
  for (uint32_t d = 0; d < 4; ++d) CHECK(std::count(labels.begin(), labels.end(), d) == 2);
}

TEST_CASE("hosts of unequal size: the deal fills each to its workers and still spreads the replicas") {
  Plan p = one_layer({{0, 1}, {0, 1}, {2, 3}, {2, 3}, {0, 2}, {1, 3}}, 4);
  std::vector<uint32_t> workers = {0, 0, 0, 1, 1, 2};  // 3 + 2 + 1
  auto labels = deal_domains(p, workers);
  REQUIRE(labels.size() == 6);
  CHECK(std::count(labels.begin(), labels.end(), 0u) == 3);
  CHECK(std::count(labels.begin(), labels.end(), 1u) == 2);
  CHECK(std::count(labels.begin(), labels.end(), 2u) == 1);
  CHECK(every_expert_on_two(p, labels));
}

TEST_CASE("the plan in force's deal is kept when it is as good, replaced when it is worse") {
  Plan p = blocks();
  std::vector<uint32_t> workers = {0, 0, 1, 1, 2, 2, 3, 3};
  std::vector<uint32_t> good = {3, 2, 1, 0, 0, 1, 2, 3};  // a different deal, also with nothing co-located
  CHECK(deal_domains(p, workers, &good) == good);
  std::vector<uint32_t> bad = workers;  // the positions in order: co-located
  CHECK(deal_domains(p, workers, &bad) != bad);
  std::vector<uint32_t> wrong_sizes = {0, 0, 0, 1, 2, 2, 3, 3};
  CHECK(deal_domains(p, workers, &wrong_sizes) != wrong_sizes);
}

TEST_CASE("two data-parallel groups are two copies of the model: replicas in different groups do not conflict") {
  Plan p = one_layer({{0, 1}, {2, 3}, {0, 1}, {2, 3}}, 4);
  p.groups = {2, 2};
  CHECK(colocated(p, {0, 0, 1, 1}) == 0);  // each group on its own host
  CHECK(colocated(p, {0, 1, 0, 1}) == 0);
  Plan q = p;
  q.groups.clear();
  // one group: positions 0 and 2 (host 0) both hold experts 0 and 1, positions 1 and 3 (host 1) 2 and 3
  CHECK(colocated(q, {0, 1, 0, 1}) == 4);
}

namespace {

// Four groups of two positions, each group a whole model of 4 experts; SPARe's stacks for four
// groups with r = 2 (the ruler {0, 1}: group g hosts shard types g and g + 1 mod 4).
Plan four_groups() {
  Plan p = one_layer({{0, 1}, {2, 3}, {0, 1}, {2, 3}, {0, 1}, {2, 3}, {0, 1}, {2, 3}}, 4);
  p.groups = {2, 2, 2, 2};
  p.stacks.redundancy = 2;
  p.stacks.hosts = {{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  p.stacks.alive.assign(4, true);
  return p;
}

// The groups each domain holds a position of.
std::vector<std::set<uint32_t>> groups_on(const Plan& p, const std::vector<uint32_t>& labels) {
  std::vector<std::set<uint32_t>> out(domain_count(labels));
  for (uint32_t pos = 0; pos < labels.size(); ++pos) out[labels[pos]].insert(group_of(p, pos).group);
  return out;
}

// Whether losing any one domain leaves every shard type a host among the groups it does not touch.
bool every_domain_loss_masked(const Plan& p, const std::vector<uint32_t>& labels) {
  for (const auto& lost : groups_on(p, labels)) {
    std::set<uint32_t> covered;
    for (uint32_t g = 0; g < p.stacks.hosts.size(); ++g)
      if (!lost.count(g)) covered.insert(p.stacks.hosts[g].begin(), p.stacks.hosts[g].end());
    if (covered.size() < p.stacks.hosts.size()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("groups on hosts of their size: each group on one host, so a host lost is one group lost") {
  Plan p = four_groups();
  auto labels = deal_domains(p, {0, 0, 1, 1, 2, 2, 3, 3});
  REQUIRE(labels.size() == 8);
  for (const auto& groups : groups_on(p, labels)) CHECK(groups.size() == 1);
  CHECK(every_domain_loss_masked(p, labels));
  // spreading each group over two hosts (what dealing for replicas alone does) downs two groups a host
  std::vector<uint32_t> spread = {0, 1, 2, 3, 0, 1, 2, 3};
  for (const auto& groups : groups_on(p, spread)) CHECK(groups.size() == 2);
}

TEST_CASE("hosts of two groups: the groups sharing a host host no shard type in common, so a host loss is masked") {
  Plan p = four_groups();
  std::vector<uint32_t> workers = {0, 0, 0, 0, 1, 1, 1, 1};  // 2 hosts x 4 workers
  auto labels = deal_domains(p, workers);
  REQUIRE(labels.size() == 8);
  auto on = groups_on(p, labels);
  REQUIRE(on.size() == 2);
  CHECK(on[0] == std::set<uint32_t>{0, 2});
  CHECK(on[1] == std::set<uint32_t>{1, 3});
  CHECK(every_domain_loss_masked(p, labels));
  // the groups in order two to a host would lose shard type 1 (or 3) with a host
  CHECK_FALSE(every_domain_loss_masked(p, workers));
}

TEST_CASE("groups of unequal size on hosts of unequal size: best fit keeps whole hosts for whole groups") {
  Plan p = one_layer({{0, 1}, {2, 3}, {0, 2}, {0, 1}, {2, 3}, {0, 1}, {2, 3}}, 4);
  p.groups = {3, 2, 2};
  p.stacks.hosts = {{0, 1}, {1, 2}, {2, 0}};
  std::vector<uint32_t> workers = {0, 0, 1, 1, 2, 2, 3};  // hosts of 2, 2, 2 and 1 worker
  auto labels = deal_domains(p, workers);
  REQUIRE(labels.size() == 7);
  auto on = groups_on(p, labels);
  // group 0 takes a host of two and the host of one; groups 1 and 2 a whole host each
  uint32_t split = 0;
  for (const auto& groups : on) split += groups.size() > 1;
  CHECK(split == 0);
  CHECK(labels[2] == 3);
}

TEST_CASE("a grouped plan's deal in force is kept unless it splits groups or shares types more") {
  Plan p = four_groups();
  std::vector<uint32_t> workers = {0, 0, 1, 1, 2, 2, 3, 3};
  std::vector<uint32_t> other = {3, 3, 2, 2, 1, 1, 0, 0};  // each group on one host, another order
  CHECK(deal_domains(p, workers, &other) == other);
  std::vector<uint32_t> spread = {0, 1, 2, 3, 0, 1, 2, 3};
  CHECK(deal_domains(p, workers, &spread) != spread);
}

TEST_CASE("the remap keeps each position on a worker of its host, and says when that host has none left") {
  Plan p = blocks();
  p.domains = deal_domains(p, {0, 0, 1, 1, 2, 2, 3, 3});
  Holdings held(8, std::vector<std::vector<ExpertId>>(1));
  std::vector<bool> alive(8, true);
  std::vector<uint32_t> host = {0, 0, 1, 1, 2, 2, 3, 3};
  auto r = greedy_remap(held, alive, p, host);
  REQUIRE(r.ok());
  for (uint32_t pos = 0; pos < 8; ++pos) CHECK(host[size_t(r->node_of_position[pos])] == p.domains[pos]);
  // an unconstrained remap would have put position 1 on node 1, host 0 (with position 0)
  host = {0, 0, 0, 1, 2, 2, 3, 3};  // host 0 has three workers, host 1 one: the plan's deal does not fit
  auto bad = greedy_remap(held, alive, p, host);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("failure domain 1") != std::string::npos);
  // a worker that already holds its position's experts keeps them, within its host
  Holdings holding(8);
  for (uint32_t n = 0; n < 8; ++n) holding[n] = {p.layers[0].placement[7 - n]};
  std::vector<uint32_t> reversed_hosts(8);
  for (uint32_t n = 0; n < 8; ++n) reversed_hosts[n] = p.domains[7 - n];
  auto kept = greedy_remap(holding, alive, p, reversed_hosts);
  REQUIRE(kept.ok());
  CHECK(kept->fetched == 0);
}

TEST_CASE("domains in a plan file: written, read back, and checked") {
  Plan p = blocks();
  p.domains = {0, 1, 2, 3, 0, 1, 2, 3};
  auto back = plan_from_json(nlohmann::json::parse(plan_to_json(p).dump()));
  REQUIRE(back.ok());
  CHECK(back->domains == p.domains);
  auto j = nlohmann::json::parse(plan_to_json(p).dump());
  j["domains"] = {0, 1, 2};
  auto short_list = plan_from_json(j);
  REQUIRE_FALSE(short_list.ok());
  CHECK_MESSAGE(short_list.error().message().find("3 labels for 8 positions") != std::string::npos,
                short_list.error().message());
  j["domains"] = {0, 0, 2, 2, 0, 0, 2, 2};
  auto gap = plan_from_json(j);
  REQUIRE_FALSE(gap.ok());
  CHECK_MESSAGE(gap.error().message().find("domain 1 has no position") != std::string::npos, gap.error().message());
}

namespace {

// Whether every expert of every layer is on at least two racks.
bool every_expert_on_two_racks(const Plan& p) { return every_expert_on_two(p, rack_of_positions(p)); }

}  // namespace

TEST_CASE("racks: replicas spread over racks before hosts, where the hosts alone would put an expert's two replicas in one rack") {
  Plan p = blocks();
  std::vector<uint32_t> workers = {0, 0, 1, 1, 2, 2, 3, 3};  // 4 hosts x 2 workers
  std::vector<uint32_t> racks = {0, 0, 1, 1};                // hosts 0, 1 in rack 0; 2, 3 in rack 1
  // dealt over hosts alone: experts 0 and 1 on hosts 0 and 1 — both in rack 0
  Plan hosts_only = p;
  hosts_only.domains = deal_domains(p, workers);
  hosts_only.racks = racks;
  CHECK(every_expert_on_two(p, hosts_only.domains));
  CHECK_FALSE(every_expert_on_two_racks(hosts_only));
  // dealt over racks and hosts: every expert on both racks, and still on two hosts
  Plan dealt = p;
  dealt.domains = deal_domains(p, workers, nullptr, racks);
  dealt.racks = racks;
  REQUIRE(dealt.domains.size() == 8);
  CHECK(every_expert_on_two_racks(dealt));
  CHECK(every_expert_on_two(p, dealt.domains));
  CHECK(check_domains(dealt).ok());
  // the hosts-only deal in force is not kept under racks: it is worse there
  CHECK(deal_domains(p, workers, &hosts_only.domains, racks) != hosts_only.domains);
  CHECK(on_hosts(dealt) == " on 4 hosts in 2 racks");
}

TEST_CASE("racks and groups: groups sharing a rack host no shard type in common") {
  Plan p = four_groups();
  std::vector<uint32_t> workers = {0, 0, 1, 1, 2, 2, 3, 3};
  std::vector<uint32_t> racks = {0, 0, 1, 1};
  p.domains = deal_domains(p, workers, nullptr, racks);
  p.racks = racks;
  REQUIRE(p.domains.size() == 8);
  for (const auto& groups : groups_on(p, p.domains)) CHECK(groups.size() == 1);  // a group a host
  CHECK(every_domain_loss_masked(p, rack_of_positions(p)));                      // a rack lost is masked too
  CHECK_FALSE(every_domain_loss_masked(p, {0, 0, 0, 0, 1, 1, 1, 1}));            // groups 0, 1 in one rack are not
}

TEST_CASE("racks in a plan file: written, read back, and checked against the domains") {
  Plan p = blocks();
  p.domains = {0, 1, 2, 3, 0, 1, 2, 3};
  p.racks = {0, 1, 0, 1};
  auto j = nlohmann::json::parse(plan_to_json(p).dump());
  auto back = plan_from_json(j);
  REQUIRE(back.ok());
  CHECK(back->racks == p.racks);
  CHECK(rack_of_positions(*back) == std::vector<uint32_t>{0, 1, 0, 1, 0, 1, 0, 1});
  j["racks"] = {0, 1};
  auto short_list = plan_from_json(j);
  REQUIRE_FALSE(short_list.ok());
  CHECK_MESSAGE(short_list.error().message().find("racks has 2 labels for 4 domains") != std::string::npos,
                short_list.error().message());
  j["racks"] = {0, 2, 0, 2};
  auto gap = plan_from_json(j);
  REQUIRE_FALSE(gap.ok());
  CHECK_MESSAGE(gap.error().message().find("rack 1 has no domain") != std::string::npos, gap.error().message());
  j.erase("domains");
  auto orphan = plan_from_json(j);
  REQUIRE_FALSE(orphan.ok());
  CHECK(orphan.error().message().find("racks without domains") != std::string::npos);
}
