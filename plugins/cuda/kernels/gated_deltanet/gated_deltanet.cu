// CUDA variants of the Gated DeltaNet ops: causal_conv1d (gated_deltanet/causal_conv1d_tiled.cu,
// "tiled", for decode; gated_deltanet/causal_conv1d_rows.cu, "rows", for prompts: the schedule
// tables route by token count) and the three forms of gated_delta_rule, recurrent for decode
// (gated_deltanet/gated_delta_rule_recurrent.cu) and two chunked ones for prefill: chunked64
// (gated_deltanet/gated_delta_rule_chunked.cu, one CTA walks a sequence's chunks) and
// chunked64_parallel (gated_deltanet/gated_delta_rule_chunked_parallel.cu, everything but the state
// carry parallel over chunks). Two fused decode ops join them: conv_l2_norm "decode"
// (gated_deltanet/conv_l2_norm.cu: the conv and the L2 norm of q and k) and gated_delta_step
// "decode" (gated_deltanet/gated_delta_step.cu: gating, one delta-rule step and the gated output
// norm), which turn a decode step's five launches per layer into two. This file registers them all
// and holds the launch and description helpers they share (gated_deltanet/common.cuh).
//
// Routing needs no code here: the chunked forms support only calls with a sequence of two or
// more tokens, so decode steps can only plan to the recurrent form; for prefill the planner
// takes the ordinary variant with the larger residency x tokens_per_cta, a chunked form (64
// tokens per CTA against 1, and no card keeps 64 recurrent CTAs per SM resident). Between the
// two chunked forms the residency decides and a tie keeps the first registered,
// chunked64_parallel (docs/cuda-gated-deltanet.md). A card whose shared memory cannot hold
// either chunked form's tiles (very large head dims) falls back to the recurrent form, which
// supports every shape. The fused ops have one variant each, which the planner takes for
// every shape it supports (decode steps; 128 x 128 heads for gated_delta_step): no schedule
// table entry names them, and the model runs the unfused ops where they decline.
#include <cstdarg>
#include <cstdio>
#include <initializer_list>

#include "gated_deltanet/common.cuh"
#include "common/grid_dependency.cuh"

namespace ninfer::cuda_plugin {
namespace gated_deltanet {

int32_t fail(int32_t status, char* err, size_t err_len, const char* fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return status;
}

int32_t launch_kernel(const KernelInfo& k, dim3 grid, const ninfer_launch* l, void** params, void* stream,
                      char* err, size_t err_len) {
  cudaError_t rc = set_max_dynamic_smem(k.kernel, l->dynamic_smem_bytes);
  if (rc == cudaSuccess)
    rc = ninfer::cuda_plugin::launch_kernel(k.kernel, grid, dim3(l->block), params, l->dynamic_smem_bytes,
                                            static_cast<cudaStream_t>(stream));
  if (rc == cudaSuccess) return NINFER_OK;
  return fail(NINFER_ERR_LAUNCH, err, err_len, "%s/%s: launch grid (%u,%u,%u) block %d smem %zu tokens [%lld,%lld): %s",
              k.op, k.variant, grid.x, grid.y, grid.z, l->block, l->dynamic_smem_bytes,
              static_cast<long long>(l->token_begin), static_cast<long long>(l->token_end), cudaGetErrorString(rc));
}

int32_t describe_kernel(const KernelInfo& k, int32_t tokens_per_cta, int32_t split_k, ninfer_variant& v, char* err,
                        size_t err_len) {
  const BuildResource* res = find_build_resource(k.symbol);
  if (!res)
    return fail(NINFER_ERR_UNSUPPORTED, err, err_len, "%s/%s: kernel %s missing from the build resource table", k.op,
                k.variant, k.symbol);
  v.op = k.op;
  v.name = k.variant;
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED_GRID_STRIDE;
  v.cooperative = 0;
  v.split_k = split_k;
  v.tokens_per_cta = tokens_per_cta;
  v.dtype_mask = 1u << NINFER_DTYPE_F32;
  v.resources = make_resources(*res, k.threads);
  return NINFER_OK;
}

} // namespace gated_deltanet

int32_t register_gated_deltanet(const ninfer_registrar* r, char* err, size_t err_len) {
  // chunked64_parallel before chunked64: where both reach the same residency x tokens per
  // CTA, the planner keeps the first registered.
  for (auto reg : {gated_deltanet::register_causal_conv1d, gated_deltanet::register_causal_conv1d_rows,
                   gated_deltanet::register_gated_delta_rule_chunked_parallel,
                   gated_deltanet::register_gated_delta_rule_chunked,
                   gated_deltanet::register_gated_delta_rule_recurrent, gated_deltanet::register_conv_l2_norm,
                   gated_deltanet::register_gated_delta_step})
    if (int32_t rc = reg(r, err, err_len); rc != NINFER_OK) return rc;
  return NINFER_OK;
}

} // namespace ninfer::cuda_plugin
