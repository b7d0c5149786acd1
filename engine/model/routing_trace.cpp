// routing_trace.cpp — see routing_trace.h.
#include "model/routing_trace.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/apportion.h"
#include "core/load_trace.h"

namespace sal::model {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Recorded counts as integer weights (a CSV's may have fractions); all zero: even.
std::vector<uint64_t> weights_of(const std::vector<double>& counts) {
  std::vector<uint64_t> w;
  for (double c : counts) w.push_back(uint64_t(std::llround(c * 1024)));
  if (std::all_of(w.begin(), w.end(), [](uint64_t x) { return x == 0; })) std::fill(w.begin(), w.end(), 1);
  return w;
}

// total apportioned by weight with no part above cap (total <= cap * parts): each round the parts
// over the cap are held at it and their excess shared by the others' weights.
std::vector<uint64_t> capped_apportion(uint64_t total, std::vector<uint64_t> weights, uint64_t cap) {
  std::vector<uint64_t> out(weights.size(), 0);
  auto none = [&] { return std::all_of(weights.begin(), weights.end(), [](uint64_t w) { return w == 0; }); };
  while (total > 0 && !none()) {
    const std::vector<uint64_t> part = apportion(total, weights);
    bool over = false;
    for (size_t i = 0; i < part.size(); ++i)
      if (weights[i] > 0 && part[i] > cap) {
        total -= cap;
        out[i] = cap;
        weights[i] = 0;
        over = true;
      }
    if (!over) {
      for (size_t i = 0; i < part.size(); ++i) out[i] += part[i];
      return out;
    }
  }
  // only capped parts had weight: the rest go to the parts below the cap, in order
  for (size_t i = 0; i < out.size() && total > 0; ++i) {
    const uint64_t n = std::min(total, cap - out[i]);
    out[i] += n;
    total -= n;
  }
  return out;
}

}  // namespace

Result<RoutingTrace> RoutingTrace::make(std::vector<Layers> files, int layers, int experts, int64_t every,
                                        const std::string& what) {
  if (files.empty()) return fail(what, ": no loads");
  if (layers < 1 || experts < 1) return fail(what, ": a model of ", layers, " layers and ", experts, " experts");
  if (every < 1) return fail(what, ": ", every, " steps per file (at least 1)");
  for (size_t f = 0; f < files.size(); ++f) {
    if (files[f].empty()) return fail(what, ": file ", f, " has no layers");
    if (files[f].size() != files[0].size())
      return fail(what, ": file ", f, " has ", files[f].size(), " layers, the first ", files[0].size());
    for (const auto& row : files[f])
      if (row.size() != size_t(experts))
        return fail(what, ": file ", f, " has ", row.size(), " experts per layer; model.experts is ", experts);
  }
  RoutingTrace t;
  t.files_ = std::move(files);
  t.layers_ = layers;
  t.every_ = every;
  return t;
}

Result<RoutingTrace> RoutingTrace::load(const std::string& path, int layers, int experts, int64_t every) {
  auto steps = read_load_trace(path);
  if (!steps) return steps.error();
  std::vector<Layers> files;
  for (auto& s : *steps) files.push_back(std::move(s.loads));
  auto t = make(std::move(files), layers, experts, every, path);
  if (t) t->source_ = describe_trace(*steps);
  return t;
}

size_t RoutingTrace::file_of(uint64_t step) const { return size_t((step / uint64_t(every_)) % files_.size()); }

std::vector<uint64_t> RoutingTrace::counts(uint64_t step, int layer, uint64_t N, int k) const {
  const Layers& file = files_[file_of(step)];
  const size_t recorded = size_t(layer) * file.size() / size_t(layers_);
  const std::vector<double>& row = file[std::min(recorded, file.size() - 1)];
  const uint64_t K = uint64_t(std::min<int64_t>(k, int64_t(row.size())));
  return capped_apportion(N * K, weights_of(row), N);
}

void RoutingTrace::route(uint64_t step, int layer, uint64_t N, int k, uint64_t first, int n, int32_t* idx) const {
  if (N == 0) return;
  const std::vector<uint64_t> c = counts(step, layer, N, k);
  std::vector<uint64_t> ends(c.size());  // assignment i is expert e where ends[e-1] <= i < ends[e]
  std::partial_sum(c.begin(), c.end(), ends.begin());
  const uint64_t h = splitmix((step << 16) ^ uint64_t(layer) ^ 0x5A17A3D3ull);
  uint64_t a = N > 1 ? 1 + splitmix(h) % (N - 1) : 1;
  while (std::gcd(a, N) != 1) a = a + 1 < N ? a + 1 : 1;  // 1 is coprime: this ends
  const uint64_t b = splitmix(h ^ 0xB5ull) % N;
  for (int t = 0; t < n; ++t) {
    const uint64_t g = first + uint64_t(t);
    const uint64_t r = uint64_t(((unsigned __int128)a * (g % N) + b) % N);
    for (int j = 0; j < k; ++j) {
      const uint64_t slot = r + uint64_t(j) * N;
      const auto e = std::upper_bound(ends.begin(), ends.end(), slot) - ends.begin();
      idx[size_t(t) * size_t(k) + size_t(j)] = int32_t(std::min<ptrdiff_t>(e, ptrdiff_t(c.size()) - 1));
    }
  }
}

}  // namespace sal::model
