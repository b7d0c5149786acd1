// swiglu_experts.cu — see swiglu_experts.h. The conversions and the elementwise SwiGLU run once
// over all R rows; the products per expert on its row block. Scratch layout (each part 256-byte
// aligned): a16 [R, F] bf16, dout16 [R, d] bf16, da [R, F] fp32 (the forward's a), dh [R, 2F] fp32,
// dh16 [R, 2F] bf16.
#include "kernels/cuda/swiglu_experts.h"

#include <cuda_bf16.h>

#include <string>

#include "kernels/cuda/activation.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/gemm.h"

namespace sal::kernels::cuda {
namespace {

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

struct Scratch {
  Bf16* a16;
  Bf16* dout16;
  float* f32;  // the forward's a, the backward's da
  float* dh;
  Bf16* dh16;
};

Scratch carve(void* base, size_t R, size_t d, size_t F) {
  char* p = static_cast<char*>(base);
  Scratch s;
  s.a16 = reinterpret_cast<Bf16*>(p);
  p += aligned(R * F * sizeof(Bf16));
  s.dout16 = reinterpret_cast<Bf16*>(p);
  p += aligned(R * d * sizeof(Bf16));
  s.f32 = reinterpret_cast<float*>(p);
  p += aligned(R * F * sizeof(float));
  s.dh = reinterpret_cast<float*>(p);
  p += aligned(R * 2 * F * sizeof(float));
  s.dh16 = reinterpret_cast<Bf16*>(p);
  return s;
}

Status check(const char* fn, int G, const int* rows, int d, int F, const SwigluExpertParams* experts, size_t* R) {
  if (G < 0 || d <= 0 || F <= 0)
    return invalid_argument(std::string(fn) + ": G " + std::to_string(G) + ", d " + std::to_string(d) + ", F " +
                            std::to_string(F));
  if (G > 0 && (!rows || !experts)) return invalid_argument(std::string(fn) + ": null rows or experts");
  *R = 0;
  for (int g = 0; g < G; ++g) {
    if (rows[g] < 0) return invalid_argument(std::string(fn) + ": expert " + std::to_string(g) + " has " +
                                             std::to_string(rows[g]) + " rows");
    if (rows[g] > 0 && (!experts[g].w13 || !experts[g].w2))
      return invalid_argument(std::string(fn) + ": expert " + std::to_string(g) + " has rows but no weights");
    *R += size_t(rows[g]);
  }
  return {};
}

Status check_memory(const char* fn, size_t R, int d, int F, const SwigluSaved& saved, void* scratch,
                    size_t scratch_bytes) {
  if (!saved.x16 || !saved.h) return invalid_argument(std::string(fn) + ": null saved buffers");
  const size_t need = swiglu_experts_scratch_bytes(int(R), d, F);
  if (!scratch || scratch_bytes < need)
    return invalid_argument(std::string(fn) + ": scratch of " + std::to_string(scratch_bytes) + " bytes, needs " +
                            std::to_string(need));
  return {};
}

}  // namespace

size_t swiglu_experts_scratch_bytes(int total_rows, int d, int F) {
  const size_t R = size_t(total_rows > 0 ? total_rows : 0), D = size_t(d), FF = size_t(F);
  return aligned(R * FF * sizeof(Bf16)) + aligned(R * D * sizeof(Bf16)) + aligned(R * FF * sizeof(float)) +
         aligned(R * 2 * FF * sizeof(float)) + aligned(R * 2 * FF * sizeof(Bf16));
}

Status swiglu_experts_forward(const Context& ctx, int G, const int* rows, int d, int F,
                              const SwigluExpertParams* experts, const float* x, float* out, const SwigluSaved& saved,
                              void* scratch, size_t scratch_bytes) {
  constexpr const char* fn = "swiglu_experts_forward";
  size_t R = 0;
  SAL_CUDA_TRY(check(fn, G, rows, d, F, experts, &R));
  if (R == 0) return {};
  if (!x || !out) return invalid_argument(std::string(fn) + ": null x or out");
  SAL_CUDA_TRY(check_memory(fn, R, d, F, saved, scratch, scratch_bytes));
  const Scratch s = carve(scratch, R, size_t(d), size_t(F));
  SAL_CUDA_TRY(to_bf16(ctx, x, saved.x16, R * size_t(d)));
  size_t r0 = 0;
  for (int g = 0; g < G; ++g) {  // h = x W13
    const int m = rows[g];
    if (m > 0)
      SAL_CUDA_TRY(gemm(ctx, false, false, m, 2 * F, d, 1.0f, saved.x16 + r0 * d, experts[g].w13, 0.0f,
                        saved.h + r0 * 2 * F));
    r0 += size_t(m);
  }
  SAL_CUDA_TRY(swiglu_forward(ctx, saved.h, s.f32, int(R), F));
  SAL_CUDA_TRY(to_bf16(ctx, s.f32, s.a16, R * size_t(F)));
  r0 = 0;
  for (int g = 0; g < G; ++g) {  // out = a W2
    const int m = rows[g];
    if (m > 0) SAL_CUDA_TRY(gemm(ctx, false, false, m, d, F, 1.0f, s.a16 + r0 * F, experts[g].w2, 0.0f, out + r0 * d));
    r0 += size_t(m);
  }
  return {};
}

Status swiglu_experts_backward(const Context& ctx, int G, const int* rows, int d, int F,
                               const SwigluExpertParams* experts, const SwigluSaved& saved, const float* dout,
                               float* dx, const SwigluExpertGrads* grads, void* scratch, size_t scratch_bytes) {
  constexpr const char* fn = "swiglu_experts_backward";
  size_t R = 0;
  SAL_CUDA_TRY(check(fn, G, rows, d, F, experts, &R));
  if (R == 0) return {};
  if (!dout || !dx || !grads) return invalid_argument(std::string(fn) + ": null dout, dx or grads");
  if (dx == dout) return invalid_argument(std::string(fn) + ": dx aliases dout");
  SAL_CUDA_TRY(check_memory(fn, R, d, F, saved, scratch, scratch_bytes));
  const Scratch s = carve(scratch, R, size_t(d), size_t(F));
  SAL_CUDA_TRY(to_bf16(ctx, dout, s.dout16, R * size_t(d)));
  size_t r0 = 0;
  for (int g = 0; g < G; ++g) {  // da = dout W2^T
    const int m = rows[g];
    if (m > 0)
      SAL_CUDA_TRY(gemm(ctx, false, true, m, F, d, 1.0f, s.dout16 + r0 * d, experts[g].w2, 0.0f, s.f32 + r0 * F));
    r0 += size_t(m);
  }
  SAL_CUDA_TRY(swiglu_backward(ctx, saved.h, s.f32, s.dh, int(R), F));
  SAL_CUDA_TRY(to_bf16(ctx, s.dh, s.dh16, R * 2 * size_t(F)));
  SAL_CUDA_TRY(swiglu_forward(ctx, saved.h, s.f32, int(R), F));  // a again, for dW2
  SAL_CUDA_TRY(to_bf16(ctx, s.f32, s.a16, R * size_t(F)));
  r0 = 0;
  for (int g = 0; g < G; ++g) {
    const int m = rows[g];
    if (m > 0) {
      const Bf16* dh16 = s.dh16 + r0 * 2 * F;
      SAL_CUDA_TRY(gemm(ctx, false, true, m, d, 2 * F, 1.0f, dh16, experts[g].w13, 0.0f, dx + r0 * d));
      if (grads[g].w13)
        SAL_CUDA_TRY(gemm(ctx, true, false, d, 2 * F, m, 1.0f, saved.x16 + r0 * d, dh16, 1.0f, grads[g].w13));
      if (grads[g].w2)
        SAL_CUDA_TRY(gemm(ctx, true, false, F, d, m, 1.0f, s.a16 + r0 * F, s.dout16 + r0 * d, 1.0f, grads[g].w2));
    }
    r0 += size_t(m);
  }
  return {};
}

}  // namespace sal::kernels::cuda
