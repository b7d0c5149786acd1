// apportion.h — splitting a whole number of things (sequences of a batch, an expert's tokens) over
// parties in proportion to integer weights, in integers, the same on every machine: each party
// gets floor(total * w / W), and the rest go one each to the parties with the largest remainders
// (ties: the lower index first). With equal weights that is the even split with the first
// (total mod n) parties taking one more — the split the engine made before weights existed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sal {

// Every weight >= 0 and their sum > 0; else every party gets 0.
std::vector<uint64_t> apportion(uint64_t total, const std::vector<uint64_t>& weights);

// A contiguous share of `total` items for party `party`: [first, first + count), the parties in
// order, each at least one item while there are as many items as parties (a party with nothing to
// do would still have to take part in every collective).
std::pair<uint64_t, uint64_t> contiguous_share(uint64_t total, const std::vector<uint64_t>& weights, size_t party);

}  // namespace sal
