// Running one op every way the CUDA backend can: the planner's choice (Backend::run) and each
// registered variant forced (Backend::run_variant), so a test compares all of them with the CPU
// reference plugin on the same inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_op_env.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer::test {

// "" (the planner's choice) followed by every variant of `op` in the backend's plugin. Adds a
// test failure when the plugin has none: a test must never pass on an op that is not there.
// With `shape`: only the variants that declare its dtype and accept it (a variant for other
// dtypes, such as kv_append's compact-cache one beside a float32 cache, is not a route there).
inline std::vector<std::string> op_routes(const Backend& be, const char* op, const ninfer_shape* shape = nullptr) {
  std::vector<std::string> routes{""};
  for (const ninfer_variant* v : be.plugin().variants_for(op)) {
    if (shape && (shape->dtype < 0 || shape->dtype >= 32 || !(v->dtype_mask & (1u << shape->dtype)) ||
                  (v->supports && !v->supports(v->ctx, shape))))
      continue;
    routes.emplace_back(v->name);
  }
  EXPECT_GT(routes.size(), 1u) << be.plugin().name() << " registers no variant of " << op;
  return routes;
}

inline std::string route_name(const std::string& route) { return route.empty() ? "planner's choice" : route; }

// Runs `op` on `be` by `route` (see op_routes).
inline void run_route(Backend& be, const char* op, const std::string& route, const ninfer_shape& s,
                      const void* args) {
  if (route.empty())
    be.run(op, s, args);
  else
    be.run_variant(op, route, s, args);
}

// How many variants run_variants_then_plan forced, and how many of them were cooperative.
struct VariantRuns {
  int ran = 0;
  int cooperative = 0;
};

// Forces every variant of `op` that declares the shape's dtype and accepts the shape (one that
// fails to launch is a test failure), calling check("variant NAME", NAME) after each; then runs
// the planner's choice (workspace reserved first) and calls check("planner's choice NAME", NAME).
template <class Check>
VariantRuns run_variants_then_plan(Backend& be, const char* op, const ninfer_shape& shape, const void* args,
                                   Check check) {
  VariantRuns runs;
  for (const ninfer_variant* v : be.plugin().variants_for(op)) {
    if (!(v->dtype_mask & (1u << shape.dtype)) || (v->supports && !v->supports(v->ctx, &shape))) continue;
    try {
      be.run_variant(op, v->name, shape, args);
    } catch (const Error& e) {
      ADD_FAILURE() << "variant " << v->name << " failed: " << e.what();
      continue;
    }
    check(std::string("variant ") + v->name, std::string(v->name));
    ++runs.ran;
    runs.cooperative += v->cooperative;
  }
  be.reserve_workspace(op, shape);
  be.run(op, shape, args);
  const std::string chosen = be.plan(op, shape).variant;
  check("planner's choice " + chosen, chosen);
  return runs;
}

// Elements [0, len) of each of `rows` rows `stride` apart.
inline std::vector<float> row_elements(const std::vector<float>& buf, int64_t rows, int64_t len, int64_t stride) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(rows * len));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < len; ++i) out.push_back(buf[static_cast<size_t>(r * stride + i)]);
  return out;
}

// True when every element of the padding between rows (len..stride of each row) is still NaN:
// the op wrote nothing outside its rows.
inline bool padding_still_poisoned(const std::vector<float>& buf, int64_t rows, int64_t len, int64_t stride) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = len; i < stride; ++i)
      if (!std::isnan(buf[static_cast<size_t>(r * stride + i)])) return false;
  return true;
}

// Exact: copies and gathers move bits, they do not compute.
inline constexpr Tolerance kExactCopy{"exact-copy", 0.0, 0.0};

} // namespace ninfer::test
