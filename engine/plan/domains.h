// domains.h — failure domains: the workers that fail together. A host (one agent) and all its
// workers go at once — on a real machine, 8 GPUs — so a plan whose two replicas of an expert sit on
// two workers of one host survives no host loss for that expert, however well it does over workers.
//
// A plan's placement is decided over worker positions by the policies; then the positions are
// dealt to the domains there are (deal_domains): each position, in order, to the domain with room
// where the replicas it holds meet the fewest replicas of the same experts already there (within
// the same data-parallel group: two groups are two copies of the model). A plan of several
// data-parallel groups is dealt group first: a domain lost takes down every group it holds a
// position of, and SPARe's stacks mask lost groups, not lost workers — so each group goes onto as
// few domains as it can (best fit: the smallest domain that takes the rest of it), and groups that
// must share a domain are those hosting no shard type in common (a type hosted only by the groups
// of one domain would die with it); then the replicas as above. The deal only chooses
// which positions share a domain, so the placement's balance and its survival over workers are
// untouched; over domains it spreads every expert over as many of them as its replicas allow. The
// labels are 0-based, in the order the domains' workers come in the ask (plan.domains[p] = d: the
// worker given position p must be one of domain d's); the remap keeps to them (remap.h).
//
// P(k) over domains: fold each layer onto its domains (a domain holds what its positions hold) and
// count as over nodes (policy/algo/recovery.h).
//
// Racks (mesh.racks): a second level above the hosts — a rack fails with all its hosts. The plan
// says each host's rack (plan.racks); the deal spreads replicas over racks before hosts, and P(k)
// over racks folds the positions onto their racks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace sal::plan {

// Domain labels in order of first appearance: labels({7, 7, 3, 3, 9}) = {0, 0, 1, 1, 2}.
std::vector<uint32_t> first_seen_labels(const std::vector<uint32_t>& ids);

// How many domains the labels name (max + 1; 0 for none).
uint32_t domain_count(const std::vector<uint32_t>& labels);

// How many positions (or workers) each domain has: sizes[d].
std::vector<uint32_t> domain_sizes(const std::vector<uint32_t>& labels);

// Whether some domain holds more than one of the labelled positions (else domains change nothing).
bool shares_domains(const std::vector<uint32_t>& labels);

// Pairs of replicas of one expert (one layer, one group) that share a domain under `labels`: what
// deal_domains minimises (0: every expert on as many domains as it has replicas).
uint64_t colocated(const Plan& p, const std::vector<uint32_t>& labels);

// Labels for p's positions, as many positions per domain as `labels_of_workers` has of each (the
// ask's workers, one label each). `keep`: the labels of the plan in force, taken when they are a
// valid deal for these domains and no worse (a re-plan moves no worker between hosts for nothing).
// A grouped plan's stacks must be decided before its deal.
// `racks`: the rack of each domain (racks[d], 0-based), when racks are named: replicas are spread
// over racks first, then over the hosts of a rack, and groups sharing a rack share no shard type.
std::vector<uint32_t> deal_domains(const Plan& p, const std::vector<uint32_t>& labels_of_workers,
                                   const std::vector<uint32_t>* keep = nullptr, const std::vector<uint32_t>& racks = {});

// One layer's placement folded onto its domains: per domain, the experts its positions hold.
std::vector<std::vector<ExpertId>> fold_onto_domains(const LayerPlan& layer, const std::vector<uint32_t>& labels);

// " on 3 hosts" (" on 1 host", " on 4 hosts in 2 racks") for a plan's domains; "" for none (a
// host per worker).
std::string on_hosts(const Plan& p);

// Each position's rack (racks[domains[pos]]); empty when the plan names no racks.
std::vector<uint32_t> rack_of_positions(const Plan& p);

// Checks plan.domains (empty, or one label per position, labels 0..D-1 with none unused) and
// plan.racks (empty, or one label per domain, labels 0..R-1 with none unused).
Status check_domains(const Plan& p);

}  // namespace sal::plan
