// --by-matrix: which matrices of a token bucket ninfer-tune routes apart from the bucket's
// choice. The bucket's variant is the fastest summed over the model's matrices; one matrix may
// still run faster on another variant (on the H200 the 8B's built-in choices are each one's
// best, docs/performance.md, but other cards need not agree).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ninfer::tools {

// How much faster on its own matrix a variant must be than the bucket's choice before that
// matrix gets an entry of its own: below it, timing noise would split buckets.
constexpr double kMatrixMargin = 0.03;

// A matrix as ninfer-tune keys the model's shapes: the call shape's dims[0..2] (linear: in and
// out features, dims[2] 0; norm_linear: K, out features, gated), so that a gated and a plain
// norm_linear of the same width stay two matrices.
using MatrixDims = std::array<int64_t, 3>;

// "4096x12288", with " dims[2]=1" where dims[2] is set: a matrix in the tool's messages.
std::string matrix_name(const MatrixDims& dims);

// The times measured on one matrix at one bucket: every variant that was legal and correct there.
struct MatrixTimes {
  MatrixDims dims{};
  std::map<std::string, double> us;
};

// A matrix whose own fastest variant beats the bucket's choice on it by more than
// kMatrixMargin; the table gets an entry with its dims ahead of the bucket's entry.
struct MatrixChoice {
  MatrixDims dims{};
  std::string variant;
  double us = 0;        // that variant on this matrix
  double bucket_us = 0; // the bucket's variant on this matrix
};

// The matrices of `measured` to route apart from `bucket_variant`. A matrix on which the
// bucket's variant was not measured (not run this wide, or excluded) gets none.
std::vector<MatrixChoice> matrix_choices(const std::vector<MatrixTimes>& measured, const std::string& bucket_variant);

} // namespace ninfer::tools
