// adamw_step.h — one AdamW update of one element, shared by kernels/cpu and kernels/cuda so the two
// implementations cannot drift apart: AdamStep holds a call's settings with the bias corrections
// formed once, in double; adamw_element updates one parameter, its two moments, from its gradient.
// Compiles as plain C++ and, under nvcc, for host and device.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define SAL_HOST_DEVICE __host__ __device__
#else
#define SAL_HOST_DEVICE
#endif

namespace sal::kernels {

struct AdamStep {
  float lr, beta1, beta2, eps, weight_decay;
  float inv_bc1, inv_bc2;  // 1 / (1 - beta^t)
};

// t counts from 1.
inline AdamStep make_adam_step(float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  const double td = double(t);
  return {lr, beta1, beta2, eps, weight_decay, float(1.0 / (1.0 - std::pow(double(beta1), td))),
          float(1.0 / (1.0 - std::pow(double(beta2), td)))};
}

SAL_HOST_DEVICE inline void adamw_element(float& p, float g, float& m, float& v, const AdamStep& s) {
  const float mi = s.beta1 * m + (1.0f - s.beta1) * g;
  const float vi = s.beta2 * v + (1.0f - s.beta2) * g * g;
  m = mi;
  v = vi;
  const float mhat = mi * s.inv_bc1;
  const float vhat = vi * s.inv_bc2;
  p -= s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.weight_decay * p);
}

}  // namespace sal::kernels
