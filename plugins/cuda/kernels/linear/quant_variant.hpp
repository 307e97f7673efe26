// The registration of a linear variant on quantized weights (INT4, INT8, FP8_E4M3), host side:
// one variant, three kernels (one per code type, chosen per call from w_dtype) taking the
// parameter block of linear/quant_common.cuh by value. Not TokenVariant (common/token_variant.cuh):
// that one launches a kernel per dtype pair with the ABI's own argument struct.
//
// A Def names the variant and supplies: `name`, `threads`, `tokens_per_cta`, `kernels()` (three
// QuantKernel: int4, int8, fp8), `supports(shape)` (its token range and shapes), `invalid(args)`
// (its own launch-time checks beyond the shared ones below, or nullptr) and `grid(args, launch)`.
// A Def with more kernels than one per code type says how many (`kernel_count`) and which one a
// launch takes (`pick(args, launch)`: an index into kernels()); both or neither.
// Optional, each on its own: `dtype_mask` (the code dtypes it takes; default all three),
// `dynamic_smem(ctx, shape)` and `workspace(ctx, shape, tokens)` (the ABI's callbacks), and
// `extra(args, launch)` with `invalid_launch(args, launch)`: a fourth kernel parameter built
// from the launch (its workspace, tickets) and the checks it needs; `launch_tokens`: the most
// tokens one kernel launch takes, the call's range then run as consecutive launches of that many
// (each a launch of its own to the Def's pick, grid, extra and checks); `reads_code_tiles`: its
// kernels read codes in NINFER_QUANT_LAYOUT_TILES16 as well as row-major (the planning shape's
// dims[3] says which; a Def without it refuses tiles).
#pragma once

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "../../cuda_variant.hpp"
#include "common/token_variant.cuh"
#include "linear/quant_common.cuh"
#include "linear/variants.hpp"

namespace ninfer::cuda_plugin {

struct QuantKernel {
  const char* symbol;
  const void* fn;
};

// Whether a Def has the optional member MEMBER: NINFER_QUANT_DEF_HAS(Trait, member) defines
// Trait<D>::value.
#define NINFER_QUANT_DEF_HAS(TRAIT, MEMBER)                                  \
  template <class D, class = void>                                           \
  struct TRAIT : std::false_type {};                                         \
  template <class D>                                                         \
  struct TRAIT<D, std::void_t<decltype(D::MEMBER)>> : std::true_type {};
NINFER_QUANT_DEF_HAS(DefPicks, kernel_count)  // more kernels than one per code type
NINFER_QUANT_DEF_HAS(DefExtra, extra)         // a kernel parameter beyond (Args, begin, end)
NINFER_QUANT_DEF_HAS(DefMask, dtype_mask)     // fewer code dtypes than the three
NINFER_QUANT_DEF_HAS(DefSmem, dynamic_smem)   // dynamic shared memory
NINFER_QUANT_DEF_HAS(DefWorkspace, workspace) // a launch workspace
NINFER_QUANT_DEF_HAS(DefTiles, launch_tokens) // token tiles launched one after another
NINFER_QUANT_DEF_HAS(DefCodeTiles, reads_code_tiles) // codes in NINFER_QUANT_LAYOUT_TILES16 too
#undef NINFER_QUANT_DEF_HAS

// The shapes of a GEMV whose warps step along a row 64 bytes at a time (128 int4 codes, 64 int8
// or fp8): K a whole number of steps, and groups of whole steps or one per row (dims[2]: the
// planning group, 0 for a g_idx, which such a GEMV does not take). For a Def's supports/invalid.
constexpr int64_t kWholeStepBytes = 64;
constexpr int64_t whole_step_codes(bool int4) { return int4 ? 2 * kWholeStepBytes : kWholeStepBytes; }
inline int32_t whole_step_supports(const ninfer_shape* s) {
  const int64_t K = s->dims[0], N = s->dims[1], group = s->dims[2];
  const int64_t step = whole_step_codes(s->dtype == NINFER_DTYPE_INT4);
  if (s->tokens < 1 || K < step || N < 1 || K > INT32_MAX || N > INT32_MAX || K % step != 0) return 0;
  return group > 0 && (group % step == 0 || group >= K);
}
inline const char* whole_step_invalid(const ninfer_linear_args& a) {
  const int64_t step = whole_step_codes(a.w_dtype == NINFER_DTYPE_INT4);
  if (a.in_features % step != 0) return "in_features must be a multiple of 128 (int4) or 64 (int8, fp8)";
  if (a.wq->g_idx) return "takes no g_idx (gemv_quant_warp_* do)";
  if (a.wq->group_size % step != 0 && a.wq->group_size < a.in_features)
    return "group_size must be a multiple of 128 (int4) or 64 (int8, fp8), or >= in_features";
  if (reinterpret_cast<uintptr_t>(a.w) % 16 != 0) return "w must be 16-byte aligned";
  return nullptr;
}

template <class Def>
struct QuantLinearVariant {
  static inline const QuantKernel* planned = nullptr; // the kernel needing the most registers

  static constexpr int kernel_count() {
    if constexpr (DefPicks<Def>::value) return Def::kernel_count;
    else return 3;
  }

  static int pick(const ninfer_linear_args& a, const ninfer_launch& l) {
    if constexpr (DefPicks<Def>::value) return Def::pick(a, l);
    else return quant::code_index(a.w_dtype);
  }

  // The checks every quantized linear kernel needs (quant_weight.h's description).
  static const char* invalid(const ninfer_linear_args& a) {
    if (!ninfer_dtype_is_quantized(a.w_dtype)) return "w_dtype must be INT4, INT8 or FP8_E4M3";
    if (a.in_features < 1 || a.out_features < 1) return "in_features and out_features must be >= 1";
    if (!a.wq || !a.wq->scales) return "a quantized w_dtype needs wq with scales";
    if (a.wq->group_size < 1) return "wq->group_size must be >= 1";
    const int32_t sd = a.wq->scale_dtype;
    if (sd != NINFER_DTYPE_F32 && sd != NINFER_DTYPE_BF16 && sd != NINFER_DTYPE_F16)
      return "wq->scale_dtype must be F32, BF16 or F16";
    if (a.w_dtype == NINFER_DTYPE_FP8_E4M3 && a.wq->zeros) return "FP8_E4M3 weights take no zero points";
    if (a.wq->layout != NINFER_QUANT_LAYOUT_ROWS) {
      if (!DefCodeTiles<Def>::value) return "reads row-major codes only (wq->layout NINFER_QUANT_LAYOUT_ROWS)";
      if (a.wq->layout != NINFER_QUANT_LAYOUT_TILES16) return "wq->layout is not a NINFER_QUANT_LAYOUT_*";
      if (a.in_features % NINFER_QUANT_TILE_COLS != 0) return "codes in tiles need in_features a multiple of 128";
    }
    return Def::invalid(a);
  }

  static int32_t launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err,
                        size_t err_len) {
    const ninfer_linear_args& a = *static_cast<const ninfer_linear_args*>(args);
    if (const char* why = invalid(a)) {
      std::snprintf(err, err_len, "%s/%s: %s", NINFER_OP_LINEAR, Def::name, why);
      return NINFER_ERR_INVALID_ARGUMENT;
    }
    if constexpr (DefTiles<Def>::value) {
      for (int64_t b = l->token_begin; b < l->token_end; b += Def::launch_tokens) {
        ninfer_launch tile = *l;
        tile.token_begin = b;
        tile.token_end = std::min<int64_t>(l->token_end, b + Def::launch_tokens);
        if (int32_t rc = launch_tile(a, &tile, stream, err, err_len); rc != NINFER_OK) return rc;
      }
      return NINFER_OK;
    } else {
      return launch_tile(a, l, stream, err, err_len);
    }
  }

  // One kernel launch over the tokens of `l`.
  static int32_t launch_tile(const ninfer_linear_args& a, const ninfer_launch* l, void* stream, char* err,
                             size_t err_len) {
    if constexpr (DefExtra<Def>::value) {
      if (const char* why = Def::invalid_launch(a, *l)) {
        std::snprintf(err, err_len, "%s/%s: %s", NINFER_OP_LINEAR, Def::name, why);
        return NINFER_ERR_INVALID_ARGUMENT;
      }
    }
    quant::Args q = quant::make_args(a);
    const QuantKernel& k = Def::kernels()[pick(a, *l)];
    long long b = l->token_begin, e = l->token_end;
    const dim3 grid = Def::grid(a, *l);
    cudaError_t rc = cudaSuccess;
    // The kernel's dynamic shared memory limit to what this launch uses (the limit is per kernel).
    if (l->dynamic_smem_bytes > 0) rc = set_max_dynamic_smem(k.fn, l->dynamic_smem_bytes);
    if (rc == cudaSuccess) {
      if constexpr (DefExtra<Def>::value) {
        auto x = Def::extra(a, *l);
        void* params[] = {&q, &b, &e, &x};
        rc = launch_kernel(k.fn, grid, dim3(l->block), params, l->dynamic_smem_bytes, static_cast<cudaStream_t>(stream));
      } else {
        void* params[] = {&q, &b, &e};
        rc = launch_kernel(k.fn, grid, dim3(l->block), params, l->dynamic_smem_bytes, static_cast<cudaStream_t>(stream));
      }
    }
    if (rc != cudaSuccess) {
      std::snprintf(err, err_len, "%s/%s: launch grid (%u,%u) block %d tokens [%lld,%lld): %s", NINFER_OP_LINEAR,
                    Def::name, grid.x, grid.y, l->block, b, e, cudaGetErrorString(rc));
      cudaGetLastError(); // a failed launch must not poison the next call's error check
      return NINFER_ERR_LAUNCH;
    }
    return NINFER_OK;
  }

  static int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
    return query_kernel_attributes(planned->fn, planned->symbol, Def::threads, out, err, err_len);
  }

  static int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
    return query_driver_blocks(planned->fn, Def::threads, dyn, blocks, err, err_len);
  }

  // dims[3]: the codes' layout (linear.h).
  static bool takes_layout(const ninfer_shape* s) {
    if (s->dims[3] == NINFER_QUANT_LAYOUT_ROWS) return true;
    return DefCodeTiles<Def>::value && s->dims[3] == NINFER_QUANT_LAYOUT_TILES16 &&
           s->dims[0] % NINFER_QUANT_TILE_COLS == 0;
  }

  static int32_t supports(const void* ctx, const ninfer_shape* s) {
    if (!takes_layout(s)) return 0;
    if constexpr (DefMask<Def>::value) return (Def::dtype_mask >> s->dtype & 1u) && Def::supports(ctx, s);
    else return ninfer_dtype_is_quantized(s->dtype) && Def::supports(ctx, s);
  }

  static int32_t add(const ninfer_registrar* r, ninfer_variant& v, char* err, size_t err_len) {
    const BuildResource* most = nullptr;
    for (int i = 0; i < kernel_count(); ++i) {
      const BuildResource* res = find_build_resource(Def::kernels()[i].symbol);
      if (!res) {
        std::snprintf(err, err_len, "%s/%s: kernel %s missing from the build resource table", NINFER_OP_LINEAR,
                      Def::name, Def::kernels()[i].symbol);
        return NINFER_ERR_UNSUPPORTED;
      }
      if (!most || res->registers > most->registers) {
        most = res;
        planned = &Def::kernels()[i];
      }
    }
    v = ninfer_variant{};
    v.op = NINFER_OP_LINEAR;
    v.name = Def::name;
    v.exec = NINFER_EXEC_CUDA;
    v.geometry = NINFER_GEOMETRY_TOKEN_TILED;
    v.split_k = 1;
    v.tokens_per_cta = Def::tokens_per_cta;
    if constexpr (DefMask<Def>::value) v.dtype_mask = Def::dtype_mask;
    else v.dtype_mask = (1u << NINFER_DTYPE_INT4) | (1u << NINFER_DTYPE_INT8) | (1u << NINFER_DTYPE_FP8_E4M3);
    if constexpr (DefSmem<Def>::value) v.dynamic_smem_bytes = Def::dynamic_smem;
    if constexpr (DefWorkspace<Def>::value) v.workspace_bytes = Def::workspace;
    v.resources = make_resources(*most, Def::threads);
    v.supports = supports;
    v.launch = launch;
    v.query_loaded_resources = query;
    v.query_driver_blocks_per_sm = driver_blocks;
    return r->add_variant(r->ctx, &v);
  }
};

} // namespace ninfer::cuda_plugin
