// local_exchange.h — an ExpertExchange over the experts held in this process (every expert the
// tokens are routed to must be present). Used by tests and gradient checks, and by sampling from a
// checkpoint, where one process holds the whole model.
#pragma once

#include <map>

#include "model/exchange.h"
#include "model/expert.h"
#include "model/params.h"

namespace sal::model {

class LocalExchange : public ExpertExchange {
 public:
  explicit LocalExchange(Params& p) : p_(p) {}

  Status global_stats(int, std::vector<double>&, std::vector<double>&, double&) override { return {}; }
  Status forward(int layer, const float* x, const Routing& r, float* out) override;
  Status backward(int layer, const float* d_out, float* dx) override;

 private:
  struct Saved {
    std::vector<int> slots;  // assignment slot (t*k + j) of each row, per expert block
    ExpertBlock block;
  };
  Params& p_;
  std::map<std::pair<int, int>, Saved> saved_;  // (layer, expert)
};

}  // namespace sal::model
