#include "plan_report.hpp"

#include <fmt/format.h>

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::tools {

nlohmann::json plan_to_json(const Plan& p) {
  nlohmann::json launches = nlohmann::json::array();
  for (const auto& l : p.launches)
    launches.push_back({{"grid", {l.grid_x, l.grid_y, 1}},
                        {"ctas", l.ctas()},
                        {"block", l.block},
                        {"tokens", {l.token_begin, l.token_end}},
                        {"dynamic_smem_bytes", l.dynamic_smem},
                        {"workspace_bytes", l.workspace_bytes}});
  return {
      {"op", p.op},
      {"tokens", p.shape.tokens},
      {"dims", {p.shape.dims[0], p.shape.dims[1], p.shape.dims[2], p.shape.dims[3]}},
      {"dtype", ninfer_dtype_name(p.shape.dtype)},
      {"device",
       {{"name", p.device.name},
        {"arch", p.device.arch},
        {"sm_count", p.device.sm_count},
        {"described", p.device.described != 0}}},
      {"plugin", p.plugin},
      {"route", p.variant},
      {"variant", p.variant},
      {"cooperative", p.cooperative},
      {"library", p.library},
      {"threads_per_block", p.host || p.unfused ? 0 : p.v->resources.threads_per_block},
      {"registers_per_thread", p.host || p.unfused ? 0 : p.v->resources.registers_per_thread},
      {"unfused", p.unfused},
      {"blocks_per_sm", p.blocks_per_sm},
      {"residency", p.residency},
      {"limiter", p.limiter},
      {"wave_efficiency", p.wave_efficiency},
      {"workspace_bytes", p.workspace_bytes},
      {"source", p.source},
      {"reason", p.reason},
      {"warnings", p.warnings},
      {"launches", launches},
  };
}

std::string plan_to_text(const Plan& p) {
  std::string s;
  s += fmt::format("plan {} for {} tokens (dims {}x{}, {}) on {} [{}, {} SMs] with plugin {}\n", p.op,
                   p.shape.tokens, p.shape.dims[0], p.shape.dims[1], ninfer_dtype_name(p.shape.dtype), p.device.name,
                   p.device.arch, p.device.sm_count, p.plugin);
  s += fmt::format("  route        {}{}\n", p.variant, p.cooperative ? " (cooperative)" : "");
  s += fmt::format("  why          {} [{}]\n", p.reason, p.source);
  if (p.library) {
    // One library call (e.g. cuBLASLt) that sizes its own grids: only its helper kernel is ours.
    s += fmt::format("  kernel       library call over the whole token range (grids chosen by the library)\n");
    s += fmt::format("  helper       {} ({} threads x {} registers): {} blocks/SM x {} SMs = {} CTAs\n",
                     p.v->resources.symbol, p.v->resources.threads_per_block, p.v->resources.registers_per_thread,
                     p.blocks_per_sm, p.device.sm_count, p.residency);
  } else if (p.unfused) {
    s += "  kernels      none of its own: the ops it fuses run one after another, each planned for its shape\n";
  } else if (!p.host) {
    s += fmt::format("  kernel       {} threads x {} registers, {} B dynamic shared memory\n",
                     p.v->resources.threads_per_block, p.v->resources.registers_per_thread,
                     p.launches.front().dynamic_smem);
    s += fmt::format("  residency    {} blocks/SM x {} SMs = {} CTAs (limited by {})\n", p.blocks_per_sm,
                     p.device.sm_count, p.residency, p.limiter);
    s += fmt::format("  waves        {:.0f}% of SM slots used\n", p.wave_efficiency * 100);
  }
  s += fmt::format("  launches     {}\n", p.launches.size());
  for (const auto& l : p.launches) {
    if (p.library)
      s += fmt::format("    tokens [{}, {})  one library call, {} B workspace\n", l.token_begin, l.token_end,
                       l.workspace_bytes);
    else
      s += fmt::format("    tokens [{}, {})  grid {}x{} = {} CTAs{}\n", l.token_begin, l.token_end, l.grid_x,
                       l.grid_y, l.ctas(),
                       p.cooperative ? fmt::format("  (<= {} resident: legal)", p.residency) : "");
  }
  for (const auto& w : p.warnings) s += fmt::format("  warning      {}\n", w);
  return s;
}

} // namespace ninfer::tools
