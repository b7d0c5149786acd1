// device_model.cpp — see device_model.h: the family's model, or what it needs that the GPU path
// does not build, by its key.
#include "model/cuda/device_model.h"

#include "kernels/cuda/permute.h"
#include "model/cuda/moe_gpt_cuda.h"
#include "model/cuda/moe_llama_cuda.h"

namespace sal::model {

Result<std::unique_ptr<DeviceModel>> make_device_model(DeviceParams& p) {
  const Dims& d = p.dims();
  if (d.top_k < 1 || d.top_k > d.experts || d.top_k > kernels::cuda::kMaxTopK)
    return fail("model.top_k = ", d.top_k, ": the GPU model takes 1 <= top_k <= min(experts, ",
                kernels::cuda::kMaxTopK, ")");
  if (!d.llama()) return std::unique_ptr<DeviceModel>(std::make_unique<MoeGptCuda>(p));
  if (d.router_bias)
    return fail("model.bias_update: DeepSeek-V3's routing bias is not built on GPU workers yet (train with "
                "model.bias_update = 0, or on CPU workers)");
  return std::unique_ptr<DeviceModel>(std::make_unique<MoeLlamaCuda>(p));
}

}  // namespace sal::model
