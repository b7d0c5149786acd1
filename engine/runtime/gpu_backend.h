// gpu_backend.h — the GPU DeviceCompute (device_compute.h): one worker on one GPU. It owns the
// GPU's kernels::cuda::Context and, for the units the plan gives this rank, a model::DeviceParams
// with the model (MoeGptCuda), the expert exchange (LocalDeviceExchange with one rank; with
// several, PlanDeviceExchange and PlanGradientSync over the plan's Gloo data plane:
// gpu_exchange.h) and the optimizer (OptimizerCuda) that run on it. Built only with the CUDA path (library
// sal_runtime_gpu); cmd_worker hands make_gpu_compute to the worker when it is there.
#pragma once

#include <memory>

#include "runtime/device_compute.h"

namespace sal::runtime {

// Opens GPU `ordinal` (cuda:N) on the calling thread, which must be the one that trains. Fails,
// naming the device, when the machine has no usable GPU, no GPU of that ordinal, or the Context
// cannot be made.
Result<std::unique_ptr<DeviceCompute>> make_gpu_compute(int ordinal, const DeviceOptions& options);

}  // namespace sal::runtime
