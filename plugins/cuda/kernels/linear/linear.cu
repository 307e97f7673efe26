// CUDA variants of linear (y = x . W^T, contract: ninfer/abi/ops/linear.h):
//   gemv1, gemv2, gemv4, gemv8   decode-sized: stream W once per tile of 1/2/4/8 tokens
//                                (linear/linear_gemv_mma.cu, bf16 on the tensor cores:
//                                linear/linear_gemv_mma_bf16.cuh); what decode speed rests on
//   gemv_cc1, gemv_cc2           one/two tokens on the CUDA cores: the run-time compiled
//                                jit_gemv family's kernel, prebuilt with the parameters that
//                                won ninfer-tune --jit-sweep (linear/linear_gemv_warp.cu)
//   gemv_k4                      one token, each row's reduction split across four warps
//                                (linear/linear_gemv_4warps.cu)
//   gemv_pipe                    gemv_k4's layout in one wave of resident CTAs with the next
//                                weight loads always in flight: the H200's decode projections
//                                (linear/linear_gemv_4warps_one_wave.cu, linear/row_pair_one_wave.cuh)
//   tiled64, tiled128            prefill-sized: shared-memory tiles of x and W, register
//                                blocking (linear/linear_fma_tiles.cu)
//   cublaslt                     prefill-sized: cuBLASLt (bf16 tensor cores for bf16 W, x
//                                rounded to bf16; plain float32 for f32 W), a library call
//                                the planner does not size (linear/linear_cublaslt.cu)
// and norm_linear's gemv_cc1 (linear/norm_linear_gemv_warp.cu), gemv_k4 (linear/norm_linear_gemv_4warps.cu, each row pair's
// reduction split across four warps) and gemv_pipe (linear/norm_linear_gemv_4warps_one_wave.cu, in one wave): one
// token's rms_norm + linear (+ SwiGLU) in one kernel, the decode form of a block's first projection.
// Which one runs for a token count is the schedule table's choice (arch/schedules/sm_*.yaml),
// else the planner's; model code only names the op.
#include "../../cuda_variant.hpp"
#include "linear/variants.hpp"

namespace ninfer::cuda_plugin {

int32_t register_linear(const ninfer_registrar* r, char* err, size_t err_len) {
  if (int32_t rc = register_linear_gemv(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_cc(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_k4(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_pipe(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_tiled(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_cublaslt(r, err, err_len); rc != NINFER_OK) return rc;
  // gemv_cc1 before gemv_k4: the planner keeps the first of equals, and the tables name gemv_k4
  // only where a measurement chose it.
  if (int32_t rc = register_norm_linear(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_norm_linear_k4(r, err, err_len); rc != NINFER_OK) return rc;
  return register_norm_linear_pipe(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
