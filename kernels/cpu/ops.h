// ops.h — every CPU operator kernel of both model families, forward and backward, in one include. These are the
// reference implementations: kernels/cuda will offer the same functions on device memory, and tests
// compare the two. Conventions: row-major contiguous float32; sizes as int (size_t for flat lengths);
// outputs are overwritten unless a comment says "accumulates" (+=) — parameter gradients always
// accumulate (callers sum micro-batches or replicas into them), activation gradients are overwritten.
// Results are deterministic: the same inputs give the same bits whatever set_threads said.
//
//   parallel.h   set_threads / num_threads (OpenBLAS + our pool)
//   gemm.h       gemm, gemm_ld, add_bias, bias_grad
//   activation.h gelu_forward / gelu_backward, swiglu_forward / swiglu_backward
//   norm.h       layernorm_forward / layernorm_backward
//   rmsnorm.h    rmsnorm_forward / rmsnorm_backward
//   rope.h       rope_forward / rope_backward (rotary positions)
//   softmax.h    softmax_forward / softmax_backward, topk
//   attention.h  attention_forward / attention_backward (causal, multi-head)
//   heads.h      expand_kv_heads / collapse_kv_heads (grouped-query attention)
//   router.h     moe-llama's router: sigmoid, top-k weights, logsumexp, the scores' and logits' gradients
//   embedding.h  embedding_forward / embedding_backward
//   loss.h       cross_entropy_forward / cross_entropy_backward
//   optim.h      adamw, sum_squares, scale
//   blas1.h      axpy
#pragma once

#include "kernels/cpu/activation.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/blas1.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/heads.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/router.h"
#include "kernels/cpu/softmax.h"
