// Helpers every CUDA kernel family of the plugin uses to describe its variants.
#pragma once

#include <cstddef>
#include <cstdint>

#include "build_resources.hpp"
#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cuda_plugin {

// Resources of one compiled kernel as the planner needs them.
ninfer_kernel_resources make_resources(const BuildResource& r, int32_t threads_per_block);

// cudaFuncGetAttributes on the current device, in the plugin ABI's form.
int32_t query_kernel_attributes(const void* kernel, const char* symbol, int32_t threads_per_block,
                                ninfer_kernel_resources* out, char* err, size_t err_len);

// cudaOccupancyMaxActiveBlocksPerMultiprocessor with the kernel's dynamic-smem limit raised
// the way its launches raise it.
int32_t query_driver_blocks(const void* kernel, int32_t threads_per_block, size_t dynamic_smem, int32_t* blocks,
                            char* err, size_t err_len);

// A variant that is a library call (cuBLASLt) beside helper kernels of its own: the planner makes
// one launch over the call's tokens (NINFER_GEOMETRY_LIBRARY), the library picks its grids, and
// the planner can check only the helper kernel's resources, which the variant reports.
struct LibraryHelper {
  const void* kernel;
  const char* symbol; // its name in the build resource table
  int32_t threads;
};
struct LibraryVariant {
  const char* op;
  const char* name;
  uint32_t dtype_mask;
  decltype(ninfer_variant::workspace_bytes) workspace_bytes;
  decltype(ninfer_variant::supports) supports;
  decltype(ninfer_variant::launch) launch;
};
// Fills `v` for `spec` around `helper` and adds it. Both must outlive the plugin (static
// storage): the core keeps `v`, and `helper` is its ctx.
int32_t add_library_variant(const ninfer_registrar* r, ninfer_variant& v, const LibraryVariant& spec,
                            const LibraryHelper& helper, char* err, size_t err_len);

// One registration function per op family or op (kernels/<family>/<family>.cu, else the op's
// own file).
int32_t register_gdn_gating(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_pointwise_ops(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_linear(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_attention(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_gated_deltanet(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_argmax(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_sample(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_draft_accept(const ninfer_registrar* r, char* err, size_t err_len);
int32_t register_fill_random(const ninfer_registrar* r, char* err, size_t err_len);

} // namespace ninfer::cuda_plugin
