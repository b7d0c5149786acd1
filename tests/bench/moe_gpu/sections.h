// sections.h — the four measured sections of bench_moe_gpu, called in turn by main.cpp:
// (a) the reference ceilings (ceilings.cpp), (b) the MoE layer (moe_layer.cu), (c) the dispatch
// schedule + permute (dispatch.cu) and (d) the expert GEMMs alone (expert_gemms.cpp); (b), (c) and
// (d) report against the ceilings of (a).
#pragma once

#include "tests/bench/moe_gpu/bench_util.h"

namespace sal::bench::moe_gpu {

struct Ceilings {
  double peak_tflops = 0;  // best bf16 matmul call
  double copy_gbps = 0;    // best device-to-device copy, read + write
};

// (a): the bf16 matmul peak and the HBM copy bandwidth, measured now.
Ceilings measure_ceilings(const Context& ctx, const Args& args, JsonFile& json);

// (b): the MoE layer forward + backward at GPT-S/M/L, top-1 and top-2, skew 1 and 4.
void run_layer(const Context& ctx, const Args& args, const Ceilings& ref, JsonFile& json);

// (c): the dispatch schedule + permute as effective GB/s, at one worker and a pretend eight.
void run_dispatch(const Context& ctx, const Args& args, const Ceilings& ref, JsonFile& json);

// (d): the expert GEMMs alone at 512, 2 048 and 8 192 rows per expert, as % of the peak of (a).
void run_expert_gemms(const Context& ctx, const Args& args, const Ceilings& ref, JsonFile& json);

}  // namespace sal::bench::moe_gpu
