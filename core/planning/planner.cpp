#include "ninfer/planning/planner.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <set>

#include "ninfer/support/error.hpp"
#include "ninfer/planning/occupancy.hpp"
#include "ninfer/planning/op_catalog.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/planning/schedule_table.hpp"

namespace ninfer {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

size_t dyn_smem(const ninfer_variant& v, const ninfer_shape& s) {
  return v.dynamic_smem_bytes ? v.dynamic_smem_bytes(v.ctx, &s) : 0;
}

size_t workspace(const ninfer_variant& v, const ninfer_shape& s, int64_t tokens) {
  return v.workspace_bytes ? v.workspace_bytes(v.ctx, &s, tokens) : 0;
}

// Whether the call meets the op's own condition on its shape: an op whose contract takes one
// token per sequence serves no call that states more.
bool contract_admits(std::string_view op, const ninfer_shape& s) {
  const OpInfo* info = find_op(op);
  return !(info && info->one_token_per_sequence && s.max_seq_tokens > 1);
}

bool takes_dtype(const ninfer_variant& v, int32_t dtype) {
  return dtype >= 0 && dtype < 32 && (v.dtype_mask & (1u << dtype));
}

bool usable(const ninfer_variant& v, const ninfer_shape& s, const ninfer_device_info& d) {
  const bool exec_ok = (v.exec == NINFER_EXEC_HOST) == (d.kind == NINFER_DEVICE_CPU);
  return exec_ok && takes_dtype(v, s.dtype) && contract_admits(v.op, s) && (!v.supports || v.supports(v.ctx, &s));
}

bool has_unfused_form(std::string_view op) {
  const OpInfo* info = find_op(op);
  return info && info->unfused_form;
}

// Tokens one cooperative launch of `v` can cover: whole token tiles whose CTAs all fit.
int64_t single_launch_tokens(const ninfer_variant& v, int64_t cta_cap) {
  return (cta_cap / v.split_k) * v.tokens_per_cta;
}

} // namespace

OpList::OpList(std::string_view list) {
  if (!list.empty()) list_ = fmt::format(",{},", list);
}

OpList OpList::from_env(const char* name, const char* effect) {
  const char* v = std::getenv(name);
  if (!v || !*v) return {};
  static std::mutex m;
  static std::set<std::string> announced;
  {
    std::lock_guard lock(m);
    if (announced.insert(name).second) spdlog::warn("{}={}: {}", name, v, effect);
  }
  return OpList(v);
}

bool OpList::names(std::string_view op, const ninfer_shape& shape) const {
  return !list_.empty() && (list_.find(fmt::format(",{},", op)) != std::string::npos ||
                            list_.find(fmt::format(",{}@{}x{},", op, shape.dims[0], shape.dims[1])) != std::string::npos);
}

OpList unfused_ops_from_env() {
  return OpList::from_env("NINFER_UNFUSED_OPS", "the fused ops named here run as the ops they fuse");
}

Planner::Planner(const LoadedPlugin& plugin, const ninfer_device_info& device, const ScheduleTable* table,
                 OpList unfused)
    : plugin_(plugin), device_(device), table_(table), unfused_(std::move(unfused)) {}

Plan Planner::unfused_plan(std::string_view op, const ninfer_shape& shape, std::string source,
                           std::string reason) const {
  if (shape.tokens < 1) throw Error(fmt::format("{}: token count must be >= 1 (got {})", op, shape.tokens));
  Plan p;
  p.op = std::string(op);
  p.plugin = plugin_.name();
  p.variant = std::string(kUnfusedRoute);
  p.unfused = true;
  p.shape = shape;
  p.device = device_;
  p.source = std::move(source);
  p.reason = std::move(reason);
  return p;
}

Plan Planner::plan_variant(const ninfer_variant& v, const ninfer_shape& shape, int64_t max_ctas) const {
  if (shape.tokens < 1) throw Error(fmt::format("{}: token count must be >= 1 (got {})", v.op, shape.tokens));
  if (!contract_admits(v.op, shape))
    throw Error(fmt::format("{}/{}: the op takes one token per sequence, the call has up to {}", v.op, v.name,
                            shape.max_seq_tokens));
  if (!usable(v, shape, device_))
    throw Error(fmt::format("{}/{} cannot compute this shape on {}", v.op, v.name, device_.name));
  Plan p;
  p.op = v.op;
  p.plugin = plugin_.name();
  p.variant = v.name;
  p.v = &v;
  p.shape = shape;
  p.device = device_;
  p.cooperative = v.cooperative != 0;
  p.source = "planner";
  const int64_t T = shape.tokens;

  if (v.exec == NINFER_EXEC_HOST) {
    p.host = true;
    p.launches.push_back({0, T, 1, 1, 1, 0, workspace(v, shape, T)});
    p.workspace_bytes = p.launches.back().workspace_bytes;
    p.wave_efficiency = 1.0;
    return p;
  }

  const size_t smem = dyn_smem(v, shape);
  const Occupancy occ = occupancy(v.resources, smem, device_);
  p.blocks_per_sm = occ.blocks_per_sm;
  p.residency = occ.residency;
  p.limiter = occ.limiter;
  if (occ.blocks_per_sm == 0)
    throw Error(fmt::format("{}/{} cannot run on {}: {} ({} threads x {} registers, {} B dynamic shared memory)",
                            v.op, v.name, device_.name, occ.limiter, v.resources.threads_per_block,
                            v.resources.registers_per_thread, smem));
  if (p.cooperative && !device_.cooperative_launch)
    throw Error(fmt::format("{}/{} needs cooperative launches, which {} does not support", v.op, v.name,
                            device_.name));

  const int32_t block = v.resources.threads_per_block;
  const int64_t tiles_total = ceil_div(T, v.tokens_per_cta);
  if (p.cooperative) {
    const int64_t cap = max_ctas > 0 ? std::min<int64_t>(max_ctas, occ.residency) : occ.residency;
    const int64_t per_launch = single_launch_tokens(v, cap);
    if (per_launch < 1)
      throw Error(fmt::format("{}/{}: a launch of one token tile needs {} CTAs, only {} may be resident on {}",
                              v.op, v.name, v.split_k, cap, device_.name));
    // Even slices: the same number of launches, each as full as the others.
    const int64_t n = ceil_div(T, per_launch);
    const int64_t tiles_per = ceil_div(tiles_total, n);
    for (int64_t b = 0; b < T; b += tiles_per * v.tokens_per_cta) {
      const int64_t e = std::min(T, b + tiles_per * v.tokens_per_cta);
      p.launches.push_back({b, e, static_cast<int32_t>(ceil_div(e - b, v.tokens_per_cta)), v.split_k,
                            block, smem, workspace(v, shape, e - b)});
    }
  } else if (v.geometry == NINFER_GEOMETRY_LIBRARY) {
    // One call over the whole range; the launch function sizes its own grids. Residency above
    // is the helper kernel's, kept to prove it can run here.
    p.library = true;
    p.launches.push_back({0, T, 1, v.split_k, block, smem, workspace(v, shape, T)});
  } else {
    int64_t grid = tiles_total;
    if (v.geometry == NINFER_GEOMETRY_TOKEN_TILED_GRID_STRIDE && tiles_total > occ.residency) {
      // Balanced waves: the fewest CTAs that still give every CTA the same number of tiles.
      const int64_t waves = ceil_div(tiles_total, occ.residency);
      grid = ceil_div(tiles_total, waves);
    }
    if (grid > std::numeric_limits<int32_t>::max())
      throw Error(fmt::format("{}/{}: {} tokens need a grid beyond the launch limit", v.op, v.name, T));
    p.launches.push_back({0, T, static_cast<int32_t>(grid), v.split_k, block, smem, workspace(v, shape, T)});
  }
  int64_t ctas = 0;
  for (const auto& l : p.launches) {
    ctas += l.ctas();
    p.workspace_bytes = std::max(p.workspace_bytes, l.workspace_bytes);
  }
  p.wave_efficiency = p.library       ? 0.0 // not ours to know
                      : p.cooperative ? static_cast<double>(ctas) / (p.launches.size() * occ.residency)
                                      : wave_efficiency(ctas, occ.residency);
  return p;
}

Plan Planner::plan(std::string_view op, const ninfer_shape& shape) const {
  const bool unfusable = has_unfused_form(op);
  // 0. The route override: a fused op it names runs as the ops it fuses.
  if (unfusable && unfused_.names(op, shape))
    return unfused_plan(op, shape, "NINFER_UNFUSED_OPS", "route override: the ops it fuses, each planned on its own");

  std::vector<std::string> warnings;
  // 1. The first schedule-table entry for this bucket whose variant takes the call: its dtype
  //    and its shape's conditions (an entry of another dtype's variant, such as a float GEMV for
  //    a quantized linear, or of a variant that needs whole groups for a g_idx weight, lets the
  //    next entry of the bucket serve). One that takes the call but cannot launch it here is a
  //    warning. An entry of an op that takes one token per sequence does not apply to a call
  //    with more.
  if (table_) {
    for (const ScheduleEntry& entry : table_->entries) {
      if (!entry.covers(op, shape)) continue;
      const ScheduleEntry* e = &entry;
      if (e->variant == kUnfusedRoute) {
        if (unfusable)
          return unfused_plan(op, shape, e->where,
                              fmt::format("schedule table {} {}: the ops it fuses, each planned on its own",
                                          table_->source, e->describe_bucket()));
        warnings.push_back(fmt::format("{}: schedule entry {} -> {}: the op has no unfused form; using the "
                                       "planner's choice", e->where, e->op, e->variant));
        break;
      }
      if (!contract_admits(op, shape)) break;
      try {
        // A variant the plugin makes on demand is built at its first use when the table was not
        // checked against the device (check_against builds it otherwise).
        std::string why_unknown;
        const ninfer_variant* v = plugin_.resolve_variant(device_, op, e->variant, &why_unknown);
        if (!v)
          throw Error(fmt::format("plugin {} has no variant '{}'{}", plugin_.name(), e->variant,
                                  why_unknown.empty() ? "" : ": " + why_unknown));
        if (!usable(*v, shape, device_)) continue;
        Plan p = plan_variant(*v, shape, e->max_ctas.value_or(0));
        p.source = e->where;
        p.reason = fmt::format("schedule table {} {}", table_->source, e->describe_bucket());
        return p;
      } catch (const Error& err) {
        warnings.push_back(fmt::format("{}: schedule entry {} -> {} not usable for {} tokens: {}; using the "
                                       "planner's choice", e->where, e->op, e->variant, shape.tokens, err.what()));
        break;
      }
    }
  }

  // 2. The planner's own route. Prefer the cooperative split-K variant with the most splits
  //    whose whole token range fits one launch (most parallelism for small T); when none fits,
  //    an ordinary variant with a wave-balanced grid; failing that, the cooperative variant
  //    that needs the fewest slices.
  struct Candidate {
    const ninfer_variant* v;
    Occupancy occ;
  };
  std::vector<Candidate> cands;
  for (const auto* v : plugin_.variants_for(op)) {
    if (!usable(*v, shape, device_)) continue;
    if (v->exec == NINFER_EXEC_HOST) {
      cands.push_back({v, {}});
      continue;
    }
    Occupancy occ = occupancy(v->resources, dyn_smem(*v, shape), device_);
    if (occ.blocks_per_sm == 0) continue;
    if (v->cooperative && !device_.cooperative_launch) continue;
    cands.push_back({v, occ});
  }
  if (cands.empty()) {
    // 3. A fused op the plugin cannot run for this shape (or for a call of several tokens per
    //    sequence, when it takes one): the core runs the ops it fuses.
    if (unfusable) {
      Plan p = unfused_plan(op, shape, "planner",
                            contract_admits(op, shape)
                                ? fmt::format("plugin {} has no variant for this shape: the ops it fuses, each "
                                              "planned on its own", plugin_.name())
                                : fmt::format("{} tokens of one sequence (the op takes one): the ops it fuses, "
                                              "each planned on its own", shape.max_seq_tokens));
      p.warnings = std::move(warnings);
      return p;
    }
    throw Error(fmt::format("no variant of '{}' in plugin {} can run {} tokens (dims {}x{}, dtype {}) on {}", op,
                            plugin_.name(), shape.tokens, shape.dims[0], shape.dims[1], ninfer_dtype_name(shape.dtype),
                            device_.name));
  }

  const Candidate* best = nullptr;
  std::string reason;
  for (const auto& c : cands) {
    if (c.v->exec == NINFER_EXEC_HOST) {
      best = &c;
      reason = "host variant";
      break;
    }
  }
  if (!best) {
    for (const auto& c : cands) {
      if (!c.v->cooperative) continue;
      const int64_t cap = single_launch_tokens(*c.v, c.occ.residency);
      if (cap >= shape.tokens && (!best || c.v->split_k > best->v->split_k)) {
        best = &c;
        reason = fmt::format("most splits whose {} tokens fit one cooperative launch (up to {} tokens in {} "
                             "resident CTAs)", shape.tokens, cap, c.occ.residency);
      }
    }
  }
  // A library variant has no grid the planner could size; it runs when a schedule table names
  // it, or as the last resort below.
  auto library = [](const Candidate& c) { return c.v->geometry == NINFER_GEOMETRY_LIBRARY; };
  if (!best) {
    for (const auto& c : cands) {
      if (c.v->cooperative || library(c)) continue;
      if (!best || c.occ.residency * c.v->tokens_per_cta > best->occ.residency * best->v->tokens_per_cta) {
        best = &c;
        reason = fmt::format("{} tokens exceed every split variant's single-launch capacity; ordinary "
                             "launch with a wave-balanced grid", shape.tokens);
      }
    }
  }
  if (!best) {
    for (const auto& c : cands) {
      if (!c.v->cooperative) continue;
      if (!best || single_launch_tokens(*c.v, c.occ.residency) > single_launch_tokens(*best->v, best->occ.residency)) {
        best = &c;
        reason = "only cooperative variants: the one needing the fewest slices";
      }
    }
  }
  if (!best) {
    best = &cands.front(); // only library variants are left
    reason = "the only variant that can run: a library call";
  }
  Plan p = plan_variant(*best->v, shape);
  p.reason = reason;
  p.warnings = std::move(warnings);
  return p;
}

void execute(const Plan& plan, const void* args, void* workspace, void* stream, uint32_t* tickets) {
  if (plan.unfused)
    throw Error(fmt::format("internal: {}'s unfused route has no launch of its own; Backend::run runs it", plan.op));
  char err[512] = {0};
  for (const auto& l : plan.launches) {
    ninfer_launch launch{l.token_begin, l.token_end, l.grid_x, l.grid_y, l.block,
                         plan.cooperative ? 1 : 0, l.dynamic_smem, workspace, l.workspace_bytes, tickets};
    if (plan.v->launch(plan.v->ctx, args, &launch, stream, err, sizeof err) != NINFER_OK)
      throw Error(fmt::format("{}/{} on {} failed for tokens [{}, {}): {}", plan.op, plan.variant,
                              plan.device.name, l.token_begin, l.token_end, err));
  }
}

} // namespace ninfer
