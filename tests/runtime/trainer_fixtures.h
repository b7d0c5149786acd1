// trainer_fixtures.h — what the Trainer's tests share: a small job's TrainSpec (the CPU model of
// 2 layers and 4 experts, the repository's docs/ as its text), a PlanUpdate of `ranks` ranks that
// each hold every expert, a rendezvous store on loopback, and a CPU Trainer of that job, initialised.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "comm/store_server.h"
#include "runtime/train_spec.h"
#include "runtime/trainer.h"
#include "wire/messages.h"

namespace sal::runtime {

inline TrainSpec spec(const std::string& device) {
  TrainSpec s;
  s.dims.layers = 2, s.dims.d = 16, s.dims.heads = 2, s.dims.experts = 4, s.dims.top_k = 2, s.dims.seq_len = 16;
  s.data_path = std::string(SAL_SOURCE_DIR) + "/docs";
  s.optim.lr = 1e-2, s.optim.warmup = 3, s.optim.total_steps = 30;
  s.global_batch = 4;
  s.device = device;
  return s;
}

// A plan of `ranks` ranks (this one rank `me`), every expert in every rank's slots.
inline wire::PlanUpdate plan_update(uint64_t number, uint64_t step, const std::string& store, int ranks = 1, int me = 0) {
  wire::PlanUpdate p;
  p.epoch = 1, p.step = step, p.my_rank = me;
  for (int r = 0; r < ranks; ++r) p.ranks.push_back({0, uint32_t(r)});
  p.plan.version = number;
  p.plan.nodes = uint32_t(ranks), p.plan.slots = 4, p.plan.experts = 4;
  for (int l = 0; l < 2; ++l) {
    plan::LayerPlan layer;
    layer.replicas.assign(4, uint32_t(ranks));
    layer.placement.assign(size_t(ranks), {0, 1, 2, 3});
    p.plan.layers.push_back(layer);
  }
  p.store = store;
  return p;
}

struct Store {
  zmq::context_t zmq{1};
  comm::StoreServer server{zmq, "tcp://127.0.0.1:*"};
  std::string endpoint;
  Store() {
    auto e = server.start();
    REQUIRE(e.ok());
    endpoint = *e;
  }
};

// A CPU Trainer of spec("cpu:0"), initialised (with its own ZeroMQ context).
struct CpuTrainer {
  zmq::context_t zmq{1};
  Trainer t{zmq, spec("cpu:0")};
  CpuTrainer() { REQUIRE(t.init().ok()); }
};

}  // namespace sal::runtime
