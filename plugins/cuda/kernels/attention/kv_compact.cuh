// The compact KV cache formats (KV_INT8, KV_FP8, KV_INT4R; ninfer/abi/ops/kv_append.h) as the
// float-tile attention kernels read them: the split-KV decode with warps owning rows
// (attention/decode_rows.cuh) and the tiled prefill (attention/prefill.cu); the key-owning decode
// (decode_by_keys) widens the same codes in registers instead (attention/decode_warp_codes.cuh,
// which uses the codecs, rows and rotation below). A K/V tile is staged in pieces of
// kKvCompactPiece elements: each thread loads a piece's codes (16 bytes; int4r 8) and its row's
// scale, and widens them to float32 as it writes the float tile, so the tile and the arithmetic
// on it are the 16-bit path's (attention/tile.cuh). No dequantized copy exists outside the tile
// (or the registers). int4r keys stay rotated (k' = H k); the kernels rotate each query row once
// instead (hadamard_rotate_row), so the score is dot(H q, k').
//
// Addressing is the cache's one row rule (kv_append.h): the head row of (slot, p, kv head h) is
// r = (block * block_tokens + p % block_tokens) * kv_heads + h with block the slot's table entry
// for p; its codes start at byte r * row_bytes, its scales at r * groups (fp8: r).
#pragma once

#include "attention/tile.cuh"

namespace ninfer::cuda_plugin::attention {

// Cache element tags of the compact formats: a kernel's E parameter, as float / __half /
// __nv_bfloat16 are for the others.
struct KvInt8 {};
struct KvFp8 {};
struct KvInt4r {};

template <class E>
inline constexpr bool kv_compact = false;
template <>
inline constexpr bool kv_compact<KvInt8> = true;
template <>
inline constexpr bool kv_compact<KvFp8> = true;
template <>
inline constexpr bool kv_compact<KvInt4r> = true;

// Two e4m3fn codes (kv_append.h; bytes 0 and 2 of `p`), each its exact value times 2^-8: the
// code's bits placed in a half (sign to bit 15, exponent and mantissa to bits 7-13) are that,
// subnormals included, so no fp8 header is needed under NVRTC. 0x7f and 0xff (exponent and
// mantissa all ones, NaN in e4m3fn) read as finite here.
__device__ __forceinline__ float2 e4m3x2_over_256(uint32_t p) {
  const uint32_t h = ((p & 0x00800080u) << 8) | ((p & 0x007f007fu) << 7);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}
// The same two codes times the scale s, as the CPU reference reads them: the code's exact value
// (the half widened and multiplied by 256, exact), then one float32 product; NaN codes read NaN.
__device__ __forceinline__ void e4m3x2_scaled(uint32_t p, float s, float& lo, float& hi) {
  const float2 f = e4m3x2_over_256(p);
  const float kNan = __int_as_float(0x7fc00000);
  lo = (p & 0x7fu) == 0x7fu ? kNan : f.x * 256.f * s;
  hi = (p & 0x7f0000u) == 0x7f0000u ? kNan : f.y * 256.f * s;
}

__device__ __forceinline__ float f16_scale(const void* scales, int64_t i) {
  return __half2float(__ushort_as_half(__ldg(static_cast<const unsigned short*>(scales) + i)));
}

// One format's pieces: Raw holds kKvCompactPiece elements' codes; load() reads those of head row
// r from element d (a multiple of the piece), scale() their scale, widen() the floats q * s.
template <class F>
struct KvCodec;

template <>
struct KvCodec<KvInt8> {
  using Raw = uint4;
  __device__ static Raw load(const unsigned char* codes, int64_t r, int d, int hd) {
    return __ldg(reinterpret_cast<const uint4*>(codes + r * hd + d));
  }
  __device__ static float scale(const void* s, int64_t r, int d, int hd) {
    return f16_scale(s, r * (hd / NINFER_KV_GROUP) + d / NINFER_KV_GROUP);
  }
  __device__ static void widen(const Raw& raw, float s, float (&f)[kKvCompactPiece]) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 16; ++i) // int8 codes: sign-extend byte i % 4 of word i / 4
      f[i] = static_cast<float>(static_cast<int32_t>(w[i / 4] << (24 - 8 * (i % 4))) >> 24) * s;
  }
};

template <>
struct KvCodec<KvFp8> {
  using Raw = uint4;
  __device__ static Raw load(const unsigned char* codes, int64_t r, int d, int hd) {
    return __ldg(reinterpret_cast<const uint4*>(codes + r * hd + d));
  }
  __device__ static float scale(const void* s, int64_t r, int, int) { return __ldg(static_cast<const float*>(s) + r); }
  __device__ static void widen(const Raw& raw, float s, float (&f)[kKvCompactPiece]) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) { // bytes 0, 2 and then 1, 3 of each word
      e4m3x2_scaled(w[i], s, f[4 * i], f[4 * i + 2]);
      e4m3x2_scaled(w[i] >> 8, s, f[4 * i + 1], f[4 * i + 3]);
    }
  }
};

template <>
struct KvCodec<KvInt4r> {
  using Raw = uint2;
  __device__ static Raw load(const unsigned char* codes, int64_t r, int d, int hd) {
    return __ldg(reinterpret_cast<const uint2*>(codes + (r * hd + d) / 2));
  }
  __device__ static float scale(const void* s, int64_t r, int d, int hd) {
    return f16_scale(s, r * (hd / NINFER_KV_GROUP) + d / NINFER_KV_GROUP);
  }
  __device__ static void widen(const Raw& raw, float s, float (&f)[kKvCompactPiece]) {
    const uint32_t w[2] = {raw.x, raw.y};
#pragma unroll
    for (int i = 0; i < 16; ++i) // element d + i: nibble i of the piece, the even element's the low one
      f[i] = static_cast<float>(static_cast<int32_t>((w[i / 8] >> (4 * (i % 8))) & 15u) - 8) * s;
  }
};

// Where the rows of one (slot, kv head) live in a compact cache: KvRows' counterpart (tile.cuh),
// with head row indices instead of element offsets, since codes and scales are indexed by the row.
// tile(key0) fixes the row of the tile's first key; key key0 + j is row row0 + j * kv_heads (the
// tile lies in one block: KvRows' rule).
template <class F>
struct KvCodeRows {
  const unsigned char* k;
  const unsigned char* v;
  const void* k_scale;
  const void* v_scale;
  int kv_heads, kv_head, head_dim;
  const int32_t* table; // the slot's blocks_per_slot entries
  int block_shift;      // log2(block_tokens)
  int64_t row0;         // the tile's first key's head row (tile())

  __device__ __forceinline__ int64_t row_of(int p) const {
    const int64_t block = __ldg(table + (p >> block_shift));
    return ((block << block_shift) + (p & ((1 << block_shift) - 1))) * kv_heads + kv_head;
  }
  __device__ __forceinline__ KvCodeRows tile(int key0) const {
    KvCodeRows r = *this;
    r.row0 = row_of(key0);
    return r;
  }
  __device__ __forceinline__ int64_t row(int j) const { return row0 + static_cast<int64_t>(j) * kv_heads; }
};

template <class F>
__device__ inline KvCodeRows<F> kv_code_rows(const ninfer_kv_cache& c, int slot, int kv_head) {
  return {static_cast<const unsigned char*>(c.k),
          static_cast<const unsigned char*>(c.v),
          c.k_scale,
          c.v_scale,
          c.kv_heads,
          kv_head,
          c.head_dim,
          c.block_table + static_cast<int64_t>(slot) * c.blocks_per_slot,
          __ffs(c.block_tokens) - 1,
          0};
}

// The rows a kernel of cache element type E reads: KvRows for float32 and 16-bit caches,
// KvCodeRows for the compact formats.
template <class E>
struct KvSourceOf {
  using type = KvRows<E>;
};
template <>
struct KvSourceOf<KvInt8> {
  using type = KvCodeRows<KvInt8>;
};
template <>
struct KvSourceOf<KvFp8> {
  using type = KvCodeRows<KvFp8>;
};
template <>
struct KvSourceOf<KvInt4r> {
  using type = KvCodeRows<KvInt4r>;
};
template <class E>
using KvSource = typename KvSourceOf<E>::type;

template <class E>
__device__ inline KvSource<E> kv_source(const ninfer_kv_cache& c, int slot, int kv_head) {
  if constexpr (kv_compact<E>) return kv_code_rows<E>(c, slot, kv_head);
  else return kv_rows<E>(c, slot, kv_head);
}

// Loads keys [key0, key0 + nkeys) of a compact cache into the float K and V tiles, zero past the
// tile's keys and past head_dim (load_kv_tile's contract). Every thread of the CTA takes part;
// it issues all of its pieces' loads (codes and scales) before widening any.
template <class F, int HD, int ROWS, int THREADS>
__device__ void load_kv_code_tile(const Tiles<HD, ROWS>& t, const KvCodeRows<F>& slot_rows, int key0, int nkeys) {
  using Codec = KvCodec<F>;
  constexpr int kPerRow = HD / kKvCompactPiece, kItems = kKeysPerTile * kPerRow;
  constexpr int kIters = (kItems + THREADS - 1) / THREADS;
  const KvCodeRows<F> kv = slot_rows.tile(key0);
  typename Codec::Raw kr[kIters], vr[kIters];
  float ks[kIters], vs[kIters];
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = threadIdx.x + it * THREADS, j = i / kPerRow, d = (i % kPerRow) * kKvCompactPiece;
    kr[it] = vr[it] = typename Codec::Raw{};
    ks[it] = vs[it] = 0.f;
    if (i < kItems && j < nkeys && d < kv.head_dim) {
      const int64_t r = kv.row(j);
      kr[it] = Codec::load(kv.k, r, d, kv.head_dim);
      vr[it] = Codec::load(kv.v, r, d, kv.head_dim);
      ks[it] = Codec::scale(kv.k_scale, r, d, kv.head_dim);
      vs[it] = Codec::scale(kv.v_scale, r, d, kv.head_dim);
    }
  }
#pragma unroll
  for (int it = 0; it < kIters; ++it) {
    const int i = threadIdx.x + it * THREADS, j = i / kPerRow, d = (i % kPerRow) * kKvCompactPiece;
    if (i >= kItems) break;
    float kf[kKvCompactPiece], vf[kKvCompactPiece];
    if (j < nkeys && d < kv.head_dim) {
      Codec::widen(kr[it], ks[it], kf);
      Codec::widen(vr[it], vs[it], vf);
    } else { // a zero row keeps p * v of a masked key finite whatever the codes (load_kv_tile)
#pragma unroll
      for (int q = 0; q < kKvCompactPiece; ++q) kf[q] = vf[q] = 0.f;
    }
#pragma unroll
    for (int q = 0; q < kKvCompactPiece; q += 4) {
      *reinterpret_cast<float4*>(t.k + j * Tiles<HD, ROWS>::kStrideK + d + q) =
          make_float4(kf[q], kf[q + 1], kf[q + 2], kf[q + 3]);
      *reinterpret_cast<float4*>(t.v + j * HD + d + q) = make_float4(vf[q], vf[q + 1], vf[q + 2], vf[q + 3]);
    }
  }
}

// A K/V tile of either kind of cache (load_kv_tile or load_kv_code_tile).
template <class E, int HD, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(const Tiles<HD, ROWS>& t, const KvSource<E>& rows, int key0, int nkeys) {
  if constexpr (kv_compact<E>) load_kv_code_tile<E, HD, ROWS, THREADS>(t, rows, key0, nkeys);
  else load_kv_tile<E, HD, ROWS, THREADS>(t, rows, key0, nkeys);
}

// x <- H x for one query row of n floats in shared memory (n = head_dim, a power of two), by
// one warp: the CPU reference's butterflies in its order (plugins/cpu/common/kv_formats.hpp),
// then the 1/sqrt(n) factor, in float32 (attention.h allows float32 or wider). Each stage's
// pairs are disjoint, so lanes take pairs and meet between stages.
__device__ inline void hadamard_rotate_row(float* x, int n, int lane) {
  for (int len = 1; len < n; len <<= 1) {
    __syncwarp();
    for (int b = lane; b < n / 2; b += 32) {
      const int i = ((b & ~(len - 1)) << 1) | (b & (len - 1));
      const float a = x[i], c = x[i + len];
      x[i] = a + c;
      x[i + len] = a - c;
    }
  }
  __syncwarp();
  const float f = static_cast<float>(1.0 / sqrt(static_cast<double>(n)));
  for (int d = lane; d < n; d += 32) x[d] *= f;
  __syncwarp();
}

// Whether a kernel of cache element type E rotates its query rows (int4r keys are stored rotated).
template <class E>
inline constexpr bool kv_rotated_keys = false;
template <>
inline constexpr bool kv_rotated_keys<KvInt4r> = true;

} // namespace ninfer::cuda_plugin::attention
