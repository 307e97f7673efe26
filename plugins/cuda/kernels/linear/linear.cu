// Registration of the CUDA variants of linear (y = x . W^T, contract: ninfer/abi/ops/linear.h)
// and norm_linear (rms_norm + linear (+ SwiGLU): of one token in one kernel, of a batch or a
// mixed step's chunk in a norm that writes the cuBLASLt product's bf16 input; contract:
// ninfer/abi/ops/norm_linear.h). Each variant family is one file of this folder, named
// <op>_<variant family>.cu, whose header says what its kernels do; the planner and the schedule
// table (arch/schedules/sm_*.yaml) choose among them, model code only names the op.
#include "../../cuda_variant.hpp"
#include "linear/variants.hpp"

namespace ninfer::cuda_plugin {

int32_t register_linear(const ninfer_registrar* r, char* err, size_t err_len) {
  if (int32_t rc = register_linear_gemv_mma(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_warp(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_4warps(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_4warps_one_wave(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_fma_tiles(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_cublaslt(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_quant(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_quant_mma(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_quant_mma_split(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_int4_lean(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_gemv_fp8_lean(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_linear_cublaslt_dequant(r, err, err_len); rc != NINFER_OK) return rc;
  // gemv_warp_t1 before gemv_4warps: the planner keeps the first of equals, and the tables name
  // gemv_4warps only where a measurement chose it.
  if (int32_t rc = register_norm_linear_gemv_warp(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_norm_linear_gemv_4warps(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = register_norm_linear_gemv_4warps_one_wave(r, err, err_len); rc != NINFER_OK) return rc;
  return register_norm_linear_cublaslt(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
