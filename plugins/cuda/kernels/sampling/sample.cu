// sample on the GPU (contract: ninfer/abi/ops/sample.h): the kernels and their variants.
//   - block_per_row_vec, block_per_row: one CTA per logits row, the whole algorithm in it
//     (sampling/sample_row.cuh; float4 or scalar reads);
//   - topk_split: greedy rows and rows with a small top_k cut over the SMs, a CTA per slice
//     of a row meeting through the launch workspace (sampling/sample_topk_split.cuh).
// Every variant draws the contract's id exactly, so they differ in speed only.
#include <cuda_runtime.h>

#include <cstdint>

#include "ninfer/abi/ops/sample.h"
#include "common/grid_dependency.cuh"
#include "sampling/sample_row.cuh"
#include "sampling/sample_topk_split.cuh"

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
#include <cstdio>

#include "../../cuda_variant.hpp"
#endif

using namespace ninfer::cuda_plugin;

// The plain form (scalar strided reads, a block scan per tile for the draw) and the vector
// form (float4 reads, the top-k mass from the first top-p pass, the tiled draw): two variants
// of one algorithm, both exactly the contract.
extern "C" __global__ void __launch_bounds__(512) ninfer_sample_rows(ninfer_sample_args a, int64_t first) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  sample_row_form::sample_row<false>(a, first + blockIdx.x);
}

extern "C" __global__ void __launch_bounds__(512) ninfer_sample_rows_vec(ninfer_sample_args a, int64_t first) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  sample_row_form::sample_row<true>(a, first + blockIdx.x);
}

// topk_split: grid (slices, rows); the workspace holds every (row, slice)'s list and partial.
extern "C" __global__ void __launch_bounds__(512)
    ninfer_sample_topk_split(ninfer_sample_args a, int64_t first, sample_topk_split::Cand* cands,
                             sample_topk_split::SlicePart* parts, unsigned* tickets) {
  ninfer::cuda_plugin::grid_dependency_prologue();
  sample_topk_split::sample_split(a, first, cands, parts, tickets);
}

#ifndef __CUDACC_RTC__ // host side: NVRTC compiles the device code only (cuda-generic, docs/plugins.md)
namespace ninfer::cuda_plugin {
namespace {

constexpr int kThreads = sample_row_form::kThreads; // every form's block

int32_t supports(const void*, const ninfer_shape* s) { return s->tokens > 0 && s->dims[0] > 0 && s->dims[0] <= (1 << 30); }

int32_t rows_launch(const void* kernel, const char* name, const void* args, const ninfer_launch* l, void* stream,
                    char* err, size_t err_len) {
  ninfer_sample_args a = *static_cast<const ninfer_sample_args*>(args);
  int64_t first = l->token_begin;
  void* params[] = {&a, &first};
  const cudaError_t rc = launch_kernel(kernel, dim3(static_cast<unsigned>(l->token_end - l->token_begin)),
                                       dim3(l->block), params, 0, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "sample (%s): %lld rows of %d: %s", name, static_cast<long long>(l->token_end - first),
                  a.vocab, cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

int32_t vec_launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  return rows_launch(reinterpret_cast<const void*>(ninfer_sample_rows_vec), "block_per_row_vec", args, l, stream, err,
                     err_len);
}

int32_t scalar_launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  return rows_launch(reinterpret_cast<const void*>(ninfer_sample_rows), "block_per_row", args, l, stream, err,
                     err_len);
}

// topk_split: a CTA per slice of a row, the slices' lists and partials in the workspace, a
// ticket per row.
namespace split = sample_topk_split;

int32_t split_supports(const void*, const ninfer_shape* s) {
  return s->tokens > 0 && s->tokens <= NINFER_LAUNCH_TICKETS && s->dims[0] > 0 &&
         split::slices_for(s->dims[0]) <= split::kMaxSlices;
}

// The lists, then the partials, of `rows` rows.
size_t split_list_bytes(int64_t rows, long long vocab) {
  return static_cast<size_t>(rows) * static_cast<size_t>(split::slices_for(vocab)) * split::kMaxK * sizeof(split::Cand);
}
size_t split_bytes(int64_t rows, long long vocab) {
  return split_list_bytes(rows, vocab) +
         static_cast<size_t>(rows) * static_cast<size_t>(split::slices_for(vocab)) * sizeof(split::SlicePart);
}

size_t split_workspace(const void*, const ninfer_shape* s, int64_t tokens_in_launch) {
  return split_bytes(tokens_in_launch > 0 ? tokens_in_launch : s->tokens, s->dims[0]);
}

int32_t split_launch(const void*, const void* args, const ninfer_launch* l, void* stream, char* err, size_t err_len) {
  ninfer_sample_args a = *static_cast<const ninfer_sample_args*>(args);
  int64_t first = l->token_begin;
  const int64_t rows = l->token_end - first;
  const int slices = split::slices_for(a.vocab);
  const char* why = nullptr;
  if (rows < 1 || rows > NINFER_LAUNCH_TICKETS) why = "takes 1 to NINFER_LAUNCH_TICKETS rows per launch";
  else if (a.vocab < 1 || slices > split::kMaxSlices) why = "takes vocabularies of at most kMaxSlices slices";
  else if (!l->tickets) why = "needs the backend's launch tickets (ninfer_launch.tickets)";
  else if (!l->workspace || l->workspace_bytes < split_bytes(rows, a.vocab))
    why = "workspace too small for the slices' lists";
  if (why) {
    std::snprintf(err, err_len, "sample/topk_split: %s", why);
    return NINFER_ERR_INVALID_ARGUMENT;
  }
  auto* cands = static_cast<split::Cand*>(l->workspace);
  auto* parts = reinterpret_cast<split::SlicePart*>(static_cast<char*>(l->workspace) + split_list_bytes(rows, a.vocab));
  unsigned* tickets = l->tickets;
  void* params[] = {&a, &first, &cands, &parts, &tickets};
  const cudaError_t rc =
      launch_kernel(reinterpret_cast<const void*>(ninfer_sample_topk_split),
                    dim3(static_cast<unsigned>(slices), static_cast<unsigned>(rows)), dim3(kThreads), params, 0,
                    static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess) {
    std::snprintf(err, err_len, "sample/topk_split: %lld rows of %d: %s", static_cast<long long>(rows), a.vocab,
                  cudaGetErrorString(rc));
    return NINFER_ERR_LAUNCH;
  }
  return NINFER_OK;
}

// The variants; every field of a variant but these is the same for all.
struct SampleForm {
  const void* kernel;
  const char* symbol;
  const char* name;
  int32_t (*supports)(const void*, const ninfer_shape*);
  size_t (*workspace)(const void*, const ninfer_shape*, int64_t);
  decltype(ninfer_variant::launch) launch;
};

const SampleForm kForms[] = {
    {reinterpret_cast<const void*>(ninfer_sample_rows_vec), "ninfer_sample_rows_vec", "block_per_row_vec", supports,
     nullptr, vec_launch},
    {reinterpret_cast<const void*>(ninfer_sample_rows), "ninfer_sample_rows", "block_per_row", supports, nullptr,
     scalar_launch},
    {reinterpret_cast<const void*>(ninfer_sample_topk_split), "ninfer_sample_topk_split", "topk_split",
     split_supports, split_workspace, split_launch},
};

template <int F>
int32_t query(const void*, ninfer_kernel_resources* out, char* err, size_t err_len) {
  return query_kernel_attributes(kForms[F].kernel, kForms[F].symbol, kThreads, out, err, err_len);
}

template <int F>
int32_t driver_blocks(const void*, size_t dyn, int32_t* blocks, char* err, size_t err_len) {
  return query_driver_blocks(kForms[F].kernel, kThreads, dyn, blocks, err, err_len);
}

template <int F>
int32_t add(const ninfer_registrar* r, char* err, size_t err_len) {
  static ninfer_variant v{};
  const SampleForm& d = kForms[F];
  const BuildResource* res = find_build_resource(d.symbol);
  if (!res) {
    std::snprintf(err, err_len, "sample: kernel %s missing from the build resource table", d.symbol);
    return NINFER_ERR_UNSUPPORTED;
  }
  v.op = NINFER_OP_SAMPLE;
  v.name = d.name;
  v.exec = NINFER_EXEC_CUDA;
  v.geometry = NINFER_GEOMETRY_TOKEN_TILED; // rows: grid (rows); topk_split: (slices, rows); not cooperative
  v.split_k = 1;
  v.tokens_per_cta = 1;
  v.dtype_mask = 1u << NINFER_DTYPE_F32;
  v.resources = make_resources(*res, kThreads);
  v.supports = d.supports;
  v.workspace_bytes = d.workspace;
  v.launch = d.launch;
  v.query_loaded_resources = query<F>;
  v.query_driver_blocks_per_sm = driver_blocks<F>;
  return r->add_variant(r->ctx, &v);
}

} // namespace

// Every form is registered; the planner takes the first (the vector form) unless a schedule
// table routes a call to another.
int32_t register_sample(const ninfer_registrar* r, char* err, size_t err_len) {
  if (int32_t rc = add<0>(r, err, err_len); rc != NINFER_OK) return rc;
  if (int32_t rc = add<1>(r, err, err_len); rc != NINFER_OK) return rc;
  return add<2>(r, err, err_len);
}

} // namespace ninfer::cuda_plugin
#endif // __CUDACC_RTC__
