// The key-owning split-KV decode's warp tile over a compact cache (int8, fp8, int4r; kv_append.h):
// attention/decode_warp.cuh's walk, reading codes and scales where that one reads 16-bit rows.
//
// Why: the row-owning decode stages a compact tile through shared memory, widening codes as it
// writes the float tile; ncu on an H100 at 131,072 keys (Qwen3.5-27B, fp8) put it at 356 GB/s
// with the L1/shared-memory pipe 63% busy, slower than the bfloat16 cache's key-owning kernel
// although it reads half the bytes (docs/kv-cache.md, "Speed at long context"). Here codes go
// from global memory into registers and are widened there; no tile is staged and no barrier sits
// in the key loop.
//
//   scores  lane j owns key j: its codes in 16-byte pieces (a batch of pieces and their scales in
//           flight), widened to exact code values and dotted with q from shared memory; a
//           group's sum (64 elements; fp8: the row) is multiplied by its scale once. int4r keys
//           are rotated: the pass's q rows were rotated by the same Hadamard transform
//           (decode_pass, attention/decode_keys.cuh), so q . k is (H q) . k'.
//   values  lane l owns head_dim / 32 consecutive dims: per key their codes (8 bytes; int4r 4) and
//           their group's scale, several keys in flight; the scale multiplies the key's weight.
//
// Codes are widened without I2F (a quarter of the FMA rate on sm_90): a code's bits are placed
// in the mantissa of 2^23 and one float add removes the offset, which is exact.
#pragma once

#include "attention/decode_warp.cuh"
#include "attention/kv_compact.cuh"

namespace ninfer::cuda_plugin::attention {

// A compact format's codes as a lane widens them: a 32-bit word holds kPerWord codes, widened in
// element order to exact floats that scale() (times kv_append.h's scale) turns into the element's
// value; kRowScale: one scale per row (fp8), else one per NINFER_KV_GROUP elements.
template <class F>
struct KvCodeWord;

// The scales of int8 and int4r: one fp16 per NINFER_KV_GROUP elements of a row.
template <class F>
struct KvGroupScales {
  static constexpr bool kRowScale = false;
  __device__ static float scale(const void* s, int64_t r, int d, int hd) { return KvCodec<F>::scale(s, r, d, hd); }
  __device__ static const void* scales_of(const void* s, int64_t r, int hd) {
    return static_cast<const unsigned short*>(s) + r * (hd / NINFER_KV_GROUP);
  }
};

// Flipping the sign bit makes byte b code + 128; 0x4b0000xx is the float 2^23 + xx.
template <>
struct KvCodeWord<KvInt8> : KvGroupScales<KvInt8> {
  static constexpr int kPerWord = 4;
  __device__ static void widen(uint32_t w, float* f) {
    const uint32_t u = w ^ 0x80808080u;
    f[0] = __uint_as_float(__byte_perm(u, 0x4b000000u, 0x7540u)) - 8388736.f;
    f[1] = __uint_as_float(__byte_perm(u, 0x4b000000u, 0x7541u)) - 8388736.f;
    f[2] = __uint_as_float(__byte_perm(u, 0x4b000000u, 0x7542u)) - 8388736.f;
    f[3] = __uint_as_float(__byte_perm(u, 0x4b000000u, 0x7543u)) - 8388736.f;
  }
};

// Nibble i is element i (the even element's the low one), stored as code + 8.
template <>
struct KvCodeWord<KvInt4r> : KvGroupScales<KvInt4r> {
  static constexpr int kPerWord = 8;
  __device__ static void widen(uint32_t w, float* f) {
#pragma unroll
    for (int i = 0; i < 8; ++i) f[i] = __uint_as_float(0x4b000000u | ((w >> (4 * i)) & 15u)) - 8388616.f;
  }
};

// Codes widened to their value over 256 (e4m3x2_over_256), so the scale carries the 256 (exact).
// No NaN test per code: kv_append saturates finite rows to +-448, so a NaN code (0x7f, 0xff)
// comes only with the NaN scale of a non-finite row, and the products read NaN through it.
template <>
struct KvCodeWord<KvFp8> {
  static constexpr int kPerWord = 4;
  static constexpr bool kRowScale = true;
  __device__ static void widen(uint32_t w, float* f) {
    const float2 even = e4m3x2_over_256(w);                                    // bytes 0, 2
    const uint32_t odd_bytes = (w & 0x80008000u) | ((w >> 1) & 0x3f803f80u);  // bytes 1, 3 as halves
    const float2 odd = __half22float2(*reinterpret_cast<const __half2*>(&odd_bytes));
    f[0] = even.x, f[1] = odd.x, f[2] = even.y, f[3] = odd.y;
  }
  __device__ static float scale(const void* s, int64_t r, int d, int hd) {
    return KvCodec<KvFp8>::scale(s, r, d, hd) * 256.f;
  }
  __device__ static const void* scales_of(const void* s, int64_t r, int) { return static_cast<const float*>(s) + r; }
};

// Code bytes of a head row of hd elements.
template <class F>
__device__ __forceinline__ int64_t code_row_bytes(int hd) {
  return static_cast<int64_t>(hd) * 4 / KvCodeWord<F>::kPerWord;
}

// Lane j's key (head row r, of the tile's keys iff has_key) against the pass's R q rows: s[i].
// Pieces of 16 code bytes, a batch of 128 elements' in flight with the scales of their groups (8
// pieces of int8 or fp8, 4 of int4r: the unrolled body stays twice the 16-bit walk's, whose warps
// ncu found waiting on instruction fetch (docs/cuda-attention.md), and the codes were requested
// into L2 a tile ahead); pieces past head_dim (and a missing key's) are zero with scale 0, so they
// add nothing whatever the cache holds.
template <class F, int HD, int R>
__device__ __forceinline__ void score_codes(float (&s)[R], const float* q, const KvCodeRows<F>& kv, int64_t r,
                                            bool has_key) {
  using W = KvCodeWord<F>;
  constexpr int kElems = 4 * W::kPerWord, kPieces = HD / kElems; // elements per piece, pieces per row
  constexpr int kBatch = kPieces < 128 / kElems ? kPieces : 128 / kElems;
  constexpr int kGroupPieces = NINFER_KV_GROUP / kElems;
  static_assert(kBatch % kGroupPieces == 0, "a batch holds whole scale groups");
  const int hd = kv.head_dim, pieces = hd / kElems;
  const uint4* codes = reinterpret_cast<const uint4*>(kv.k + r * code_row_bytes<F>(hd));
  const float row_scale = W::kRowScale && has_key ? W::scale(kv.k_scale, r, 0, hd) : 0.f;
  float g[R]; // the current group's sum (fp8: the row's)
#pragma unroll
  for (int i = 0; i < R; ++i) s[i] = g[i] = 0.f;
#pragma unroll 1
  for (int p0 = 0; p0 < pieces; p0 += kBatch) {
    uint4 raw[kBatch];
    float sc[kBatch / kGroupPieces];
#pragma unroll
    for (int b = 0; b < kBatch; ++b)
      raw[b] = has_key && p0 + b < pieces ? __ldg(codes + p0 + b) : make_uint4(0, 0, 0, 0);
    if constexpr (!W::kRowScale) {
#pragma unroll
      for (int c = 0; c < kBatch / kGroupPieces; ++c) {
        const int piece = p0 + c * kGroupPieces;
        sc[c] = has_key && piece < pieces ? W::scale(kv.k_scale, r, piece * kElems, hd) : 0.f;
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      float f[kElems];
      W::widen(raw[b].x, f);
      W::widen(raw[b].y, f + W::kPerWord);
      W::widen(raw[b].z, f + 2 * W::kPerWord);
      W::widen(raw[b].w, f + 3 * W::kPerWord);
      dot_rows<HD>(g, q, (p0 + b) * kElems, f);
      if constexpr (!W::kRowScale) {
        if (b % kGroupPieces == kGroupPieces - 1) {
#pragma unroll
          for (int i = 0; i < R; ++i) {
            s[i] = fmaf(g[i], sc[b / kGroupPieces], s[i]);
            g[i] = 0.f;
          }
        }
      }
    }
  }
  if constexpr (W::kRowScale) {
#pragma unroll
    for (int i = 0; i < R; ++i) s[i] = g[i] * row_scale;
  }
}

// A compact cache's value rows as tile_values reads them: lane l's kDims dims from d0 = l * kDims
// (all in one scale group: kDims <= 8 divides it), their codes and scale per key.
template <class F, int kDims>
struct LaneValueCodes {
  using W = KvCodeWord<F>;
  using Codes = KvPiece<unsigned char, kDims * 4 / W::kPerWord>; // int8, fp8: 8 bytes; int4r: 4
  struct Raw {
    Codes c;
    float s;
  };
  // 8 keys of 2 words (int4r 1) and a scale: the 16-bit walk's count of keys and unrolled body.
  static constexpr int kKeysInFlight = 8;
  static constexpr bool kScaled = true;
  const unsigned char* v;
  const void* v_scale;
  int64_t row0;
  int kv_heads, d0, head_dim;

  __device__ LaneValueCodes(const KvCodeRows<F>& kv, int lane)
      : v(kv.v), v_scale(kv.v_scale), row0(kv.row0), kv_heads(kv.kv_heads), d0(lane * kDims), head_dim(kv.head_dim) {}
  __device__ __forceinline__ void load(Raw& raw, int j, bool in) const {
    if (in && d0 < head_dim) {
      const int64_t r = row0 + static_cast<int64_t>(j) * kv_heads;
      raw.c.load(v + r * code_row_bytes<F>(head_dim) + d0 * 4 / W::kPerWord);
      raw.s = W::scale(v_scale, r, d0, head_dim);
    } else {
      raw.c.zero();
      raw.s = 0.f;
    }
  }
  __device__ __forceinline__ float widen(const Raw& raw, int, float (&f)[kDims]) const {
#pragma unroll
    for (int w = 0; w < Codes::kWords; ++w) W::widen(raw.c.w[w], f + w * W::kPerWord);
    return raw.s;
  }
};

// warp_tile (attention/decode_warp.cuh) over a compact cache: keys [key0, key0 + nkeys) of one
// block, every one visible to every row; q: the pass's R rows in shared memory (int4r: rotated).
template <class F, int HD, int R>
__device__ void warp_tile(RowState<HD, R>& st, const float* q, const KvCodeRows<F>& slot_rows, int key0, int nkeys,
                          int lane) {
  const bool has_key = lane < nkeys;
  const KvCodeRows<F> kv = slot_rows.tile(key0);
  float s[R], p[R];
  score_codes<F, HD>(s, q, kv, kv.row(lane), has_key);
  tile_softmax(st, s, has_key, p);
  tile_values(st, p, LaneValueCodes<F, RowState<HD, R>::kDimsPerLane>(kv, lane), nkeys);
}

// Requests key j's K and V codes and scales of a tile into L2 (prefetch_tile, decode_warp.cuh).
template <class F>
__device__ __forceinline__ void prefetch_key(const KvCodeRows<F>& kv, int j) {
  const int64_t r = kv.row(j), bytes = code_row_bytes<F>(kv.head_dim);
  prefetch_l2(kv.k + r * bytes, static_cast<int>(bytes));
  prefetch_l2(kv.v + r * bytes, static_cast<int>(bytes));
  prefetch_l2(KvCodeWord<F>::scales_of(kv.k_scale, r, kv.head_dim), 1);
  prefetch_l2(KvCodeWord<F>::scales_of(kv.v_scale, r, kv.head_dim), 1);
}

} // namespace ninfer::cuda_plugin::attention
