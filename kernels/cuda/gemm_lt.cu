// gemm_lt.cu — see gemm_lt.h. The row-major product C = op(A) op(B) is, column-major, C^T =
// op(B)^T op(A)^T (gemm.cu explains the mapping): cuBLASLt's "A" is our B, its "B" our A, its D is
// C^T with N rows and M columns. A bias of length N therefore is a vector over D's rows, which is
// what cuBLASLt's bias epilogues broadcast; the GELU input (aux) has D's layout. The bias has C's
// type (cuBLASLt's rule outside its integer and fp8 kernels: an fp32 bias beside a bf16 C was
// refused by the heuristic on an H200 with cuBLAS 13.1).
//
// Each call builds its descriptors (host-side objects, microseconds), asks the heuristic for one
// algorithm (cuBLASLt caches heuristic answers per problem, so repeated shapes cost a lookup) and
// enqueues the product on ctx.stream() with the Context's workspace.
#include "kernels/cuda/gemm_lt.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <memory>
#include <string>

namespace sal::kernels::cuda {
namespace {

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayoutOpaque_t* l) const { cublasLtMatrixLayoutDestroy(l); }
};
struct PrefDeleter {
  void operator()(cublasLtMatmulPreferenceOpaque_t* p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using Desc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using Pref = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PrefDeleter>;

// What the epilogue reads or writes besides the product.
struct Epilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;   // length N, of C's type (cuBLASLt's default bias type)
  const void* aux = nullptr;    // bf16 [M,N], row stride ldaux
  int ldaux = 0;
};

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

std::string shape(const LtProduct& p) {
  return "M " + std::to_string(p.M) + ", N " + std::to_string(p.N) + ", K " + std::to_string(p.K);
}

Status check(const std::string& fn, const LtProduct& p, const Epilogue& e, const void* C, int ldc) {
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return invalid_argument(fn + ": sizes must be > 0 (" + shape(p) + ")");
  if (!p.A || !p.B || !C) return invalid_argument(fn + ": null " + (!p.A ? "A" : !p.B ? "B" : "C"));
  const int need_a = p.transA ? p.M : p.K, need_b = p.transB ? p.K : p.N;
  if (p.lda < need_a || p.ldb < need_b || ldc < p.N)
    return invalid_argument(fn + ": a leading dimension is too small (lda " + std::to_string(p.lda) + ", ldb " +
                            std::to_string(p.ldb) + ", ldc " + std::to_string(ldc) + "; " + shape(p) + ")");
  if (!aligned16(p.A) || !aligned16(p.B) || !aligned16(C))
    return invalid_argument(fn + ": A, B and C must be 16-byte aligned");
  if (e.aux) {
    if (e.ldaux < p.N || e.ldaux % 8 != 0)
      return invalid_argument(fn + ": ldaux " + std::to_string(e.ldaux) + " must be >= N " + std::to_string(p.N) +
                              " and a multiple of 8");
    if (!aligned16(e.aux)) return invalid_argument(fn + ": aux must be 16-byte aligned");
  }
  return {};
}

template <class T>
Status set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value, const std::string& fn) {
  return cublas_status(int(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof value)),
                       (fn + ": cublasLtMatmulDescSetAttribute").c_str());
}

Status make_desc(const std::string& fn, const LtProduct& p, const Epilogue& e, Desc* out) {
  cublasLtMatmulDesc_t d = nullptr;
  SAL_CUDA_TRY(cublas_status(int(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F)),
                             (fn + ": cublasLtMatmulDescCreate").c_str()));
  out->reset(d);
  const cublasOperation_t ta = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  SAL_CUDA_TRY(set(d, CUBLASLT_MATMUL_DESC_TRANSA, ta, fn));
  SAL_CUDA_TRY(set(d, CUBLASLT_MATMUL_DESC_TRANSB, tb, fn));
  SAL_CUDA_TRY(set(d, CUBLASLT_MATMUL_DESC_EPILOGUE, e.kind, fn));
  if (e.bias) SAL_CUDA_TRY(set(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, e.bias, fn));
  if (e.aux) {
    SAL_CUDA_TRY(set(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, e.aux, fn));
    SAL_CUDA_TRY(set(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, int64_t(e.ldaux), fn));
  }
  return {};
}

// A column-major layout of `rows` x `cols` with leading dimension ld.
Status make_layout(const std::string& fn, cudaDataType_t type, int rows, int cols, int ld, Layout* out) {
  cublasLtMatrixLayout_t l = nullptr;
  SAL_CUDA_TRY(cublas_status(int(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), int64_t(ld))),
                             (fn + ": cublasLtMatrixLayoutCreate").c_str()));
  out->reset(l);
  return {};
}

Status run(const Context& ctx, const std::string& fn, const LtProduct& p, const Epilogue& e, void* C,
           cudaDataType_t c_type, int ldc) {
  SAL_CUDA_TRY(check(fn, p, e, C, ldc));
  Desc desc;
  SAL_CUDA_TRY(make_desc(fn, p, e, &desc));
  // cuBLASLt's A = our B (stored [K,N], or [N,K] when transB), its B = our A, its D = C^T [N,M].
  Layout la, lb, lc;
  SAL_CUDA_TRY(make_layout(fn, CUDA_R_16BF, p.transB ? p.K : p.N, p.transB ? p.N : p.K, p.ldb, &la));
  SAL_CUDA_TRY(make_layout(fn, CUDA_R_16BF, p.transA ? p.M : p.K, p.transA ? p.K : p.M, p.lda, &lb));
  SAL_CUDA_TRY(make_layout(fn, c_type, p.N, p.M, ldc, &lc));
  cublasLtMatmulPreference_t pr = nullptr;
  SAL_CUDA_TRY(cublas_status(int(cublasLtMatmulPreferenceCreate(&pr)), (fn + ": cublasLtMatmulPreferenceCreate").c_str()));
  Pref pref(pr);
  const uint64_t ws = ctx.workspace_bytes();
  SAL_CUDA_TRY(cublas_status(
      int(cublasLtMatmulPreferenceSetAttribute(pr, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)),
      (fn + ": cublasLtMatmulPreferenceSetAttribute").c_str()));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  SAL_CUDA_TRY(cublas_status(int(cublasLtMatmulAlgoGetHeuristic(ctx.lt(), desc.get(), la.get(), lb.get(), lc.get(),
                                                                 lc.get(), pr, 1, &best, &found)),
                             (fn + ": cublasLtMatmulAlgoGetHeuristic (" + shape(p) + ")").c_str()));
  if (found == 0) return cublas_status(int(CUBLAS_STATUS_NOT_SUPPORTED), (fn + ": no cuBLASLt algorithm for " + shape(p)).c_str());
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(ctx.lt(), desc.get(), &alpha, p.B, la.get(), p.A, lb.get(), &beta, C,
                                           lc.get(), C, lc.get(), &best.algo, ctx.workspace(), ws, ctx.stream());
  return cublas_status(int(st), (fn + ": cublasLtMatmul (" + shape(p) + ")").c_str());
}

}  // namespace

Status gemm_lt_gelu_aux_bias(const Context& ctx, const LtProduct& p, const Bf16* bias, Bf16* aux, int ldaux, Bf16* C,
                             int ldc) {
  if (!bias || !aux) return invalid_argument(std::string("gemm_lt_gelu_aux_bias: null ") + (bias ? "aux" : "bias"));
  return run(ctx, "gemm_lt_gelu_aux_bias", p, Epilogue{CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, aux, ldaux}, C,
             CUDA_R_16BF, ldc);
}

Status gemm_lt_dgelu(const Context& ctx, const LtProduct& p, const Bf16* aux, int ldaux, Bf16* C, int ldc) {
  if (!aux) return invalid_argument("gemm_lt_dgelu: null aux");
  return run(ctx, "gemm_lt_dgelu", p, Epilogue{CUBLASLT_EPILOGUE_DGELU, nullptr, aux, ldaux}, C, CUDA_R_16BF, ldc);
}

Status gemm_lt_bias_f32(const Context& ctx, const LtProduct& p, const float* bias, float* C, int ldc) {
  if (!bias) return invalid_argument("gemm_lt_bias_f32: null bias");
  return run(ctx, "gemm_lt_bias_f32", p, Epilogue{CUBLASLT_EPILOGUE_BIAS, bias, nullptr, 0}, C, CUDA_R_32F, ldc);
}

}  // namespace sal::kernels::cuda
