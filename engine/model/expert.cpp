// expert.cpp — see expert.h. A frozen unit (params.h) skips the two weight-gradient GEMMs: the
// backward does half its work, a step about a third less.
#include "model/expert.h"

#include "kernels/cpu/ops.h"

namespace sal::model {

namespace k = sal::kernels::cpu;

void swiglu_mlp_forward(const float* x, const float* w13, const float* w2, int n, int D, int F, std::vector<float>& h,
                        float* out) {
  h.resize(size_t(n) * 2 * F);
  std::vector<float> a(size_t(n) * F);
  k::gemm(false, false, n, 2 * F, D, 1.0f, x, w13, 0.0f, h.data());
  k::swiglu_forward(h.data(), a.data(), n, F);
  k::gemm(false, false, n, D, F, 1.0f, a.data(), w2, 0.0f, out);
}

void swiglu_mlp_backward(const float* x, const float* w13, const float* w2, const std::vector<float>& h,
                         const float* d_out, float* dw13, float* dw2, float* dx, int n, int D, int F) {
  std::vector<float> da(size_t(n) * F), dh(size_t(n) * 2 * F);
  if (dw2) {
    std::vector<float> a(size_t(n) * F);
    k::swiglu_forward(h.data(), a.data(), n, F);  // recomputed rather than kept
    k::gemm(true, false, F, D, n, 1.0f, a.data(), d_out, 1.0f, dw2);
  }
  k::gemm(false, true, n, F, D, 1.0f, d_out, w2, 0.0f, da.data());
  k::swiglu_backward(h.data(), da.data(), dh.data(), n, F);
  if (dw13) k::gemm(true, false, D, 2 * F, n, 1.0f, x, dh.data(), 1.0f, dw13);
  k::gemm(false, true, n, D, 2 * F, 1.0f, dh.data(), w13, 0.0f, dx);
}

void expert_forward(const Dims& d, const Unit& u, ExpertBlock& b, float* out) {
  auto l = expert_layout(d);
  int n = b.rows, D = d.d, F = d.ffn();
  if (n == 0) return;
  if (d.llama()) return swiglu_mlp_forward(b.x.data(), u.at(l.w1), u.at(l.w2), n, D, F, b.h, out);
  b.h.resize(size_t(n) * F);
  std::vector<float> a(size_t(n) * F);
  k::gemm(false, false, n, F, D, 1.0f, b.x.data(), u.at(l.w1), 0.0f, b.h.data());
  k::add_bias(b.h.data(), u.at(l.b1), n, F);
  k::gelu_forward(b.h.data(), a.data(), a.size());
  k::gemm(false, false, n, D, F, 1.0f, a.data(), u.at(l.w2), 0.0f, out);
  k::add_bias(out, u.at(l.b2), n, D);
}

void expert_backward(const Dims& d, Unit& u, const ExpertBlock& b, const float* d_out, float* dx) {
  auto l = expert_layout(d);
  int n = b.rows, D = d.d, F = d.ffn();
  if (n == 0) return;
  if (d.llama())
    return swiglu_mlp_backward(b.x.data(), u.at(l.w1), u.at(l.w2), b.h, d_out, u.weight_grad(l.w1),
                               u.weight_grad(l.w2), dx, n, D, F);
  std::vector<float> da(size_t(n) * F), dh(size_t(n) * F);
  if (!u.frozen) {  // the weight gradient (a frozen expert passes the input gradient only)
    std::vector<float> a(size_t(n) * F);
    k::gelu_forward(b.h.data(), a.data(), a.size());  // recompute rather than keep [rows, 4d] twice
    k::gemm(true, false, F, D, n, 1.0f, a.data(), d_out, 1.0f, u.grad(l.w2));
    k::bias_grad(d_out, u.grad(l.b2), n, D);
  }
  k::gemm(false, true, n, F, D, 1.0f, d_out, u.at(l.w2), 0.0f, da.data());
  k::gelu_backward(b.h.data(), da.data(), dh.data(), dh.size());
  if (!u.frozen) {
    k::gemm(true, false, D, F, n, 1.0f, b.x.data(), dh.data(), 1.0f, u.grad(l.w1));
    k::bias_grad(dh.data(), u.grad(l.b1), n, F);
  }
  k::gemm(false, true, n, D, F, 1.0f, dh.data(), u.at(l.w1), 0.0f, dx);
}

}  // namespace sal::model
