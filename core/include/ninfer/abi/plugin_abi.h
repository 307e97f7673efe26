/* ninfer plugin ABI.
 *
 * A plugin is a shared library exporting one C symbol, `ninfer_plugin_entry`, that returns a
 * pointer to a static `ninfer_plugin`. The core reads `abi_version` (always the first field)
 * before touching anything else, and refuses a plugin whose version differs: a struct layout
 * guessed across versions is how wrong kernels end up running.
 *
 * Everything crossing this boundary is plain C: fixed-width integers, const char* that stay
 * valid for the life of the process (plugins are never unloaded), and function pointers.
 * Registration must not touch a device: the core registers every plugin on machines that
 * lack its GPU, so plans can be made for cards we do not own.
 */
#ifndef NINFER_ABI_PLUGIN_ABI_H
#define NINFER_ABI_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "ninfer/abi/device_info.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NINFER_PLUGIN_ABI_VERSION 10u /* 2: the registrar offers run-time compilation;
                                          3: ninfer_linear_args.accumulate;
                                          4: variant callbacks take the variant's ctx, plugins may
                                             make variants on demand, ninfer_shape.max_seq_tokens;
                                          5: quantized weight dtypes, ninfer_linear_args.wq and
                                             ninfer_norm_linear_args.wq (ops/quant_weight.h);
                                          6: ninfer_shape.flags, token_states of the Gated
                                             DeltaNet ops (causal_conv1d, gated_delta_rule,
                                             gated_delta_step);
                                          7: paged KV cache (ninfer_kv_cache.block_table,
                                             block_tokens, blocks_per_slot, pool_blocks;
                                             ninfer_shape.kv_block_tokens) and its compact
                                             formats (the KV_* dtypes, k_scale / v_scale);
                                          8: ninfer_launch.tickets;
                                          9: ninfer_copy_rows_args.groups;
                                          10: ninfer_quant_weight.layout (codes in tiles) */
#define NINFER_PLUGIN_ENTRY_SYMBOL "ninfer_plugin_entry"

/* Capability bits a plugin advertises in its descriptor. */
#define NINFER_CAP_HOST_EXECUTION    (1ull << 0) /* runs ops on the CPU */
#define NINFER_CAP_CUDA              (1ull << 1) /* runs ops on a CUDA device */
#define NINFER_CAP_COOPERATIVE       (1ull << 2) /* has cooperative (grid-synchronising) variants */
#define NINFER_CAP_BF16              (1ull << 3)
#define NINFER_CAP_ARCH_SPECIFIC     (1ull << 4) /* uses `a`-suffix instructions (sm_90a, sm_120a) */
/* A fallback for devices no other plugin serves, whose registration is costly (cuda-generic
 * compiles its kernels there). The core registers it only when it is asked for by name or when
 * no plugin without this bit scores above zero for the device being chosen for. */
#define NINFER_CAP_FALLBACK          (1ull << 5)

/* Status codes returned by plugin functions. */
#define NINFER_OK 0
#define NINFER_ERR_INVALID_ARGUMENT 1
#define NINFER_ERR_LAUNCH 2
#define NINFER_ERR_UNSUPPORTED 3

/* Element types. F32 / BF16 / F16 are plain tensors. INT4, INT8 and FP8_E4M3 are the weight
 * dtypes of a quantized matrix in ninfer's one canonical layout (ninfer/abi/ops/quant_weight.h):
 * an op that takes them says so in its contract, and reads the rest of the description from
 * its `wq` argument. */
typedef enum ninfer_dtype {
  NINFER_DTYPE_F32 = 0,
  NINFER_DTYPE_BF16 = 1,
  NINFER_DTYPE_F16 = 2,
  NINFER_DTYPE_INT4 = 3,     /* unsigned 4-bit codes, two per byte (quant_weight.h) */
  NINFER_DTYPE_INT8 = 4,     /* unsigned 8-bit codes */
  NINFER_DTYPE_FP8_E4M3 = 5, /* float8 e4m3fn codes (1 sign, 4 exponent bits of bias 7, 3 mantissa bits) */
  /* Compact KV cache formats: codes plus per-row scales, only in a ninfer_kv_cache (their exact
   * layout and rounding: kv_append.h). Kept apart from the weight dtypes above, whose codes and
   * scales follow quant_weight.h's layout instead. */
  NINFER_DTYPE_KV_INT8 = 6,  /* signed 8-bit codes, an fp16 scale per 64 elements of a head row */
  NINFER_DTYPE_KV_FP8 = 7,   /* e4m3fn codes, one float32 scale per head row */
  NINFER_DTYPE_KV_INT4R = 8, /* 4-bit codes, an fp16 scale per 64; keys Hadamard-rotated */
} ninfer_dtype;

/* Host helpers: NVRTC (cuda-generic compiles the kernel sources, which include this header) takes
 * no function without an execution space. */
#ifndef __CUDACC_RTC__
/* The dtype's name in messages: "float32", "bfloat16", "float16", "int4", "int8", "fp8_e4m3",
 * "kv_int8", "kv_fp8", "kv_int4r", "?" for any other value. */
static inline const char* ninfer_dtype_name(int32_t dtype) {
  switch (dtype) {
    case NINFER_DTYPE_F32: return "float32";
    case NINFER_DTYPE_BF16: return "bfloat16";
    case NINFER_DTYPE_F16: return "float16";
    case NINFER_DTYPE_INT4: return "int4";
    case NINFER_DTYPE_INT8: return "int8";
    case NINFER_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case NINFER_DTYPE_KV_INT8: return "kv_int8";
    case NINFER_DTYPE_KV_FP8: return "kv_fp8";
    case NINFER_DTYPE_KV_INT4R: return "kv_int4r";
    default: return "?";
  }
}

/* Whether `dtype` is a quantized weight dtype (INT4, INT8, FP8_E4M3). */
static inline int ninfer_dtype_is_quantized(int32_t dtype) {
  return dtype == NINFER_DTYPE_INT4 || dtype == NINFER_DTYPE_INT8 || dtype == NINFER_DTYPE_FP8_E4M3;
}
#endif

/* Where a variant executes. */
typedef enum ninfer_exec_kind {
  NINFER_EXEC_HOST = 0,
  NINFER_EXEC_CUDA = 1,
} ninfer_exec_kind;

/* How a variant's grid follows from the problem. Token-tiled: grid.x covers the launch's
 * token range in tiles of `tokens_per_cta`, grid.y = split_k slices of the reduction. A
 * grid-stride variant may be launched with fewer CTAs than tiles; the planner then sizes the
 * grid for wave efficiency. Library: the variant's launch function covers its whole token
 * range in one call that sizes its own grids (a vendor library call such as cuBLASLt, plus
 * helper kernels); the planner makes exactly one launch over [0, T) with grid 1 x split_k and
 * no residency plan beyond checking that the helper kernel in `resources` can run. Such a
 * variant must not be cooperative and is chosen only when a schedule table names it (or when
 * it is the only variant of its op). Added without a version bump: the struct layout is
 * unchanged, and an older core plans such a variant as one ordinary launch over [0, T) whose
 * grid the launch function ignores, which is still correct. */
typedef enum ninfer_geometry {
  NINFER_GEOMETRY_TOKEN_TILED = 0,
  NINFER_GEOMETRY_TOKEN_TILED_GRID_STRIDE = 1,
  NINFER_GEOMETRY_LIBRARY = 2,
} ninfer_geometry;

/* Resources of one compiled kernel, captured at build time from the cubin so plans can be
 * made without the device. */
typedef struct ninfer_kernel_resources {
  const char* symbol;             /* device function name in the cubin */
  int32_t threads_per_block;      /* the block size the variant launches with */
  int32_t registers_per_thread;
  int32_t static_smem_bytes;
  int32_t local_bytes_per_thread; /* stack / spills */
  int32_t max_threads_per_block;  /* from __launch_bounds__ (or the device limit) */
} ninfer_kernel_resources;

/* The shape an op is planned for; op headers say what each dim means. */
typedef struct ninfer_shape {
  int64_t tokens;
  int64_t dims[4];
  int32_t dtype; /* ninfer_dtype */
  /* The most tokens of one sequence in the call (1: a decode step), where the caller states it;
   * 0: not stated. An op whose contract takes one token per sequence (its header says so) is
   * planned onto a plugin variant only when this is 0 or 1; the core runs the ops it fuses
   * otherwise. */
  int32_t max_seq_tokens;
  /* NINFER_SHAPE_* bits: what the call asks of a variant beyond its dims. A variant that does not
   * do what a bit asks must refuse the shape in `supports`. */
  uint32_t flags;
  /* Ops that read or write a KV cache (kv_append.h): the cache's block_tokens, so a variant can
   * refuse a block size in `supports`; 0: not stated (other ops, or a caller without one). */
  int32_t kv_block_tokens;
} ninfer_shape;

/* The call passes `token_states`: the op also writes its per-slot state after every token
 * (causal_conv1d, conv_l2_norm, gated_delta_rule, gated_delta_step; speculative verification
 * keeps the state of each draft position, docs/speculative.md). */
#define NINFER_SHAPE_TOKEN_STATES (1u << 0)

/* One launch as the planner decided it. */
typedef struct ninfer_launch {
  int64_t token_begin; /* this launch covers tokens [token_begin, token_end) */
  int64_t token_end;
  int32_t grid_x;
  int32_t grid_y;
  int32_t block;
  int32_t cooperative;
  size_t dynamic_smem_bytes;
  void* workspace; /* caller-owned, at least variant->workspace_bytes(shape) */
  size_t workspace_bytes;
  /* NINFER_LAUNCH_TICKETS 32-bit counters that the CTAs of one launch may share (a split-key
   * decode's merge tickets), owned by the caller's backend: zero when it made them, and every
   * launch must leave them zero. One set per backend, and a backend launches on one stream, so
   * launches of two backends (two models in a process) never share counters. NULL: none (a
   * variant that needs them refuses the launch). */
  uint32_t* tickets;
} ninfer_launch;

#define NINFER_LAUNCH_TICKETS 1024

/* Every callback receives the variant's `ctx` first, so one function can serve many variants
 * (a plugin that builds variants at run time hands each its own object). */
typedef struct ninfer_variant {
  const char* op;      /* op contract name, e.g. "gdn_gating" */
  const char* name;    /* variant name, unique per op within a plugin, e.g. "split4" */
  int32_t exec;        /* ninfer_exec_kind */
  int32_t geometry;    /* ninfer_geometry */
  int32_t cooperative; /* 1: all CTAs must be resident at once (grid sync) */
  int32_t split_k;     /* CTAs per token tile along the reduction; 1 = unsplit */
  int32_t tokens_per_cta;
  uint32_t dtype_mask; /* bit (1 << ninfer_dtype) for each supported input dtype */
  ninfer_kernel_resources resources;
  const void* ctx;     /* handed back to every callback below; NULL when they need none */
  /* Dynamic shared memory and workspace for a shape; both may be NULL (meaning 0). */
  size_t (*dynamic_smem_bytes)(const void* ctx, const ninfer_shape* shape);
  size_t (*workspace_bytes)(const void* ctx, const ninfer_shape* shape, int64_t tokens_in_launch);
  /* Returns 1 when the variant can compute this shape (dims it was written for). */
  int32_t (*supports)(const void* ctx, const ninfer_shape* shape);
  /* Executes one planned launch. `args` is the op's argument struct (see ninfer/abi/ops/),
   * `stream` a cudaStream_t for CUDA variants (NULL for host ones). Writes a message to `err`
   * on failure. */
  int32_t (*launch)(const void* ctx, const void* args, const ninfer_launch* launch, void* stream, char* err,
                    size_t err_len);
  /* CUDA variants: reads the loaded kernel's attributes on the current device
   * (cudaFuncGetAttributes), so tests can compare them with `resources`. NULL for host. */
  int32_t (*query_loaded_resources)(const void* ctx, ninfer_kernel_resources* out, char* err, size_t err_len);
  /* CUDA variants: the driver's own residency figure for this kernel on the current device
   * (cudaOccupancyMaxActiveBlocksPerMultiprocessor at the variant's block size), so tests can
   * compare it with the planner's. NULL for host. */
  int32_t (*query_driver_blocks_per_sm)(const void* ctx, size_t dynamic_smem_bytes, int32_t* blocks, char* err,
                                        size_t err_len);
} ninfer_variant;

/* One CUDA C++ translation unit for the core's run-time compiler (NVRTC, with its on-disk
 * kernel cache): the source, the headers it may #include (by the name it includes them with),
 * extra NVRTC options. The core adds the target architecture and the CUDA toolkit's include
 * directories. Strings only need to live for the call. */
typedef struct ninfer_cuda_program {
  const char* name; /* named in errors and logs: "cuda-generic/norms.cu" */
  const char* source;
  int32_t header_count;
  const char* const* header_names;
  const char* const* header_sources;
  int32_t option_count;
  const char* const* options;
} ninfer_cuda_program;

/* What came out: a cubin (or PTX, when NVRTC cannot emit machine code for the target), owned by
 * the core and valid for the life of the process. */
typedef struct ninfer_cuda_image {
  const void* data;
  size_t size;
  int32_t is_ptx;
  int32_t from_cache; /* 1 when the kernel cache had it */
} ninfer_cuda_image;

typedef struct ninfer_registrar {
  void* ctx;
  /* The variant struct must stay valid for the life of the process. */
  int32_t (*add_variant)(void* ctx, const ninfer_variant* variant);
  /* Compiles `count` programs for compute capability cc_major.cc_minor (in parallel, through
   * the kernel cache) into images[count]. NINFER_OK, or NINFER_ERR_UNSUPPORTED with the reason
   * in err (no NVRTC or CUDA headers on this machine, a build without CUDA), or
   * NINFER_ERR_INVALID_ARGUMENT with the failing program's name and NVRTC's log in err. Null
   * where the core offers no compiler. */
  int32_t (*compile_cuda)(void* ctx, const ninfer_cuda_program* programs, int32_t count, int32_t cc_major,
                          int32_t cc_minor, ninfer_cuda_image* images, char* err, size_t err_len);
} ninfer_registrar;

typedef struct ninfer_plugin {
  uint32_t abi_version; /* NINFER_PLUGIN_ABI_VERSION; must stay the first field */
  uint32_t struct_size; /* sizeof(ninfer_plugin) as the plugin saw it */
  const char* name;     /* "cuda-sm90" */
  const char* target_arch; /* "sm_90", "sm_120a", "cpu" */
  const char* version;  /* plugin build version */
  uint64_t capabilities;
  /* 0: must not run on this device. Larger is better. Writes a one-line reason either way. */
  int32_t (*score)(const ninfer_device_info* device, char* why, size_t why_len);
  /* Adds every variant this plugin provides. Must not call into a device. */
  int32_t (*register_variants)(const ninfer_registrar* registrar);
  /* Optional (NULL: none). A variant made on demand for the live `device` from its name alone,
   * when a schedule table or a tool names one the plugin did not register (a family of
   * parameterised kernels compiled at run time, say). `services` offers compile_cuda as at
   * registration (its add_variant refuses). NINFER_OK with *out valid for the life of the
   * process (the same pointer for the same device, op and name); NINFER_ERR_UNSUPPORTED when
   * there is no variant of that name (err may say why, e.g. a malformed parameter in a family
   * name); another code, with the reason in err, when the variant exists but cannot be made
   * for this device. May touch the device. */
  int32_t (*make_variant)(const ninfer_registrar* services, const ninfer_device_info* device, const char* op,
                          const char* name, const ninfer_variant** out, char* err, size_t err_len);
  /* Optional (NULL: none). The on-demand variant names worth timing for `op` at a bucket of
   * `tokens` (ninfer-tune's sweep), written to names[] as NUL-terminated strings back to back,
   * ending with an empty one. Returns how many there are, or -1 when names_len is too small. */
  int32_t (*sweep_variant_names)(const char* op, int64_t tokens, char* names, size_t names_len);
} ninfer_plugin;

typedef const ninfer_plugin* (*ninfer_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
