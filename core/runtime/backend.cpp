#include "ninfer/runtime/backend.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ninfer/abi/ops/linear.h"
#include "ninfer/support/error.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/runtime/unfused_forms.hpp"
#include "ninfer/planning/schedule_table.hpp"

namespace ninfer {
namespace {

const LoadedPlugin& choose_plugin(const PluginHost& plugins, const ninfer_device_info& device,
                                  const std::string& forced) {
  const PluginChoice choice = plugins.choose(device, forced);
  if (choice.chosen) {
    spdlog::info("{}: plugin {} ({})", device.name, choice.chosen->name(), choice.scores.front().reason);
    return *choice.chosen;
  }
  std::string why;
  for (const auto& s : choice.scores) why += fmt::format("\n  {}: {}", s.plugin->name(), s.reason);
  if (choice.scores.empty()) why = " (no plugins were loaded)";
  throw Error(fmt::format("no plugin{} can run on {}:{}", forced.empty() ? "" : " named '" + forced + "'",
                          device.name, why));
}

std::string shape_text(const ninfer_shape& s) {
  return fmt::format("{} tokens, dims [{}, {}, {}, {}], dtype {}{}{}", s.tokens, s.dims[0], s.dims[1], s.dims[2],
                     s.dims[3], ninfer_dtype_name(s.dtype),
                     s.flags & NINFER_SHAPE_TOKEN_STATES ? ", with the state after every token" : "",
                     s.kv_block_tokens ? fmt::format(", KV blocks of {} tokens", s.kv_block_tokens) : "");
}

} // namespace

Backend::Backend(const PluginHost& plugins, const ninfer_device_info& device, BackendOptions options)
    : Backend(choose_plugin(plugins, device, options.plugin), device, options) {}

Backend::Backend(const LoadedPlugin& plugin, const ninfer_device_info& device, BackendOptions options)
    : plugin_(&plugin), device_(device), options_(std::move(options)),
      builtin_table_(options_.schedule ? nullptr
                                       : std::make_unique<ScheduleTable>(options_.tuned_schedule
                                                                          ? default_schedule_table(plugin, device)
                                                                          : builtin_schedule_table(plugin, device))),
      planner_(plugin, device, options_.schedule ? options_.schedule : builtin_table_.get()),
      memory_(options_.plan_only ? make_planning_memory_space() : make_memory_space(plugin, device)),
      sizing_(options_.plan_only) {
  report_.limit = options_.memory_limit;
  // The launch tickets are the backend's own 4 KiB, like its memory space's staging buffers:
  // outside the memory report, so a memory plan and a load count the model's buffers alone.
  if (!options_.plan_only) {
    tickets_ = static_cast<uint32_t*>(memory_->allocate(kTicketBytes));
    if (!tickets_) throw Error(fmt::format("out of {} allocating the backend's launch tickets", memory_->name()));
    memory_->zero(tickets_, kTicketBytes);
  }
}

const ScheduleTable* Backend::schedule_table() const {
  return options_.schedule ? options_.schedule : builtin_table_.get();
}

Backend::~Backend() {
  workspace_ = DeviceBuffer(); // before the memory space goes
  if (tickets_) memory_->free(tickets_, kTicketBytes);
}

DeviceBuffer Backend::allocate(size_t bytes, MemoryUse use, std::string_view what) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  if (report_.limit && report_.total + bytes > report_.limit)
    throw Error(fmt::format("cannot allocate {} bytes for {}: the memory limit of {} ({} bytes) would be exceeded "
                            "(in use: {}); lower max_context or max_concurrency, or raise the limit (--memory-limit, "
                            "runtime.memory_limit)",
                            bytes, what, format_bytes(report_.limit), report_.limit, report_.describe()));
  void* p = memory_->allocate(bytes);
  if (!p)
    throw Error(fmt::format("out of {} allocating {} bytes for {} (in use: {}); {}", memory_->name(), bytes, what,
                            report_.describe(),
                            use == MemoryUse::Weights
                                ? "the weights do not fit: use bfloat16 weights (manifest dtype: bfloat16) or a "
                                  "larger card"
                                : "lower max_context or max_sequences (manifest runtime: block)"));
  b.owner_ = this;
  b.ptr_ = p;
  b.bytes_ = bytes;
  b.use_ = use;
  b.what_ = std::string(what);
  report_.in_use[static_cast<size_t>(use)] += bytes;
  report_.total += bytes;
  ++report_.allocation_sizes[bytes];
  report_.peak = std::max(report_.peak, report_.total);
  return b;
}

DeviceBuffer Backend::allocate_weights(size_t bytes, std::string_view format, std::string_view what) {
  DeviceBuffer b = allocate(bytes, MemoryUse::Weights, what);
  if (b.empty()) return b;
  b.format_ = std::string(format);
  report_.weights_by_format[b.format_] += bytes;
  return b;
}

void Backend::release(DeviceBuffer& b) noexcept {
  memory_->free(b.ptr_, b.bytes_);
  if (!b.format_.empty())
    if (auto it = report_.weights_by_format.find(b.format_); it != report_.weights_by_format.end()) {
      it->second -= b.bytes_;
      if (it->second == 0) report_.weights_by_format.erase(it);
    }
  report_.in_use[static_cast<size_t>(b.use_)] -= b.bytes_;
  report_.total -= b.bytes_;
  if (auto it = report_.allocation_sizes.find(b.bytes_); it != report_.allocation_sizes.end() && --it->second == 0)
    report_.allocation_sizes.erase(it);
}

namespace {
void check_range(const DeviceBuffer& b, size_t offset, size_t bytes, const char* verb) {
  if (offset > b.bytes() || bytes > b.bytes() - offset)
    throw Error(fmt::format("{} of {} bytes at offset {} overruns buffer '{}' of {} bytes", verb, bytes, offset,
                            b.what(), b.bytes()));
}
} // namespace

void Backend::upload(const DeviceBuffer& dst, size_t offset, const void* src, size_t bytes) {
  check_range(dst, offset, bytes, "upload");
  if (bytes) memory_->copy_in(static_cast<char*>(dst.data()) + offset, src, bytes);
}

void Backend::download(const DeviceBuffer& src, size_t offset, void* dst, size_t bytes) {
  check_range(src, offset, bytes, "download");
  if (bytes) memory_->copy_out(dst, static_cast<const char*>(src.data()) + offset, bytes);
}

void Backend::reserve_results(size_t bytes) { memory_->reserve_results(bytes); }

void Backend::download_async(const DeviceBuffer& src, size_t offset, size_t bytes, size_t slot, size_t slot_offset) {
  check_range(src, offset, bytes, "download");
  const size_t room = memory_->result_bytes();
  if (slot >= MemorySpace::kResultSlots || slot_offset > room || bytes > room - slot_offset)
    throw Error(fmt::format("internal: an asynchronous download of {} bytes at offset {} of result slot {} (slots of "
                            "{} bytes, {} of them)",
                            bytes, slot_offset, slot, room, MemorySpace::kResultSlots));
  if (bytes) memory_->copy_out_to_results(slot, slot_offset, static_cast<const char*>(src.data()) + offset, bytes);
}

const void* Backend::downloaded(size_t slot) { return memory_->results(slot); }

void Backend::download_from(const void* src, void* dst, size_t bytes) {
  if (bytes) memory_->copy_out(dst, src, bytes);
}

void Backend::copy(const DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset,
                   size_t bytes) {
  check_range(dst, dst_offset, bytes, "copy");
  check_range(src, src_offset, bytes, "copy");
  if (bytes)
    memory_->copy_within(static_cast<char*>(dst.data()) + dst_offset, static_cast<const char*>(src.data()) + src_offset,
                         bytes);
}

void* Backend::stream() const { return memory_->stream(); }

HostBuffer Backend::allocate_host(size_t bytes, std::string_view what) {
  HostBuffer b;
  b.ptr_ = memory_->allocate_host(bytes);
  if (!b.ptr_)
    throw Error(fmt::format("{}: {} of host memory could not be had{}", what, format_bytes(bytes),
                            memory_->stream() ? " page-locked" : ""));
  b.owner_ = this;
  b.bytes_ = bytes;
  return b;
}

void Backend::release(HostBuffer& b) noexcept { memory_->free_host(b.ptr_); }

namespace {
void check_host_range(const HostBuffer& b, size_t offset, size_t bytes, const char* what) {
  if (offset > b.bytes() || bytes > b.bytes() - offset)
    throw Error(fmt::format("internal: {} of {} bytes at {} of a {}-byte host buffer", what, bytes, offset, b.bytes()));
}
} // namespace

void Backend::spill(const HostBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset,
                    size_t bytes) {
  check_host_range(dst, dst_offset, bytes, "spill");
  check_range(src, src_offset, bytes, "spill");
  if (bytes)
    memory_->spill(static_cast<char*>(dst.data()) + dst_offset, static_cast<const char*>(src.data()) + src_offset,
                   bytes);
}

void Backend::unspill(const DeviceBuffer& dst, size_t dst_offset, const HostBuffer& src, size_t src_offset,
                      size_t bytes) {
  check_range(dst, dst_offset, bytes, "restore");
  check_host_range(src, src_offset, bytes, "restore");
  if (bytes)
    memory_->unspill(static_cast<char*>(dst.data()) + dst_offset, static_cast<const char*>(src.data()) + src_offset,
                     bytes);
}

void Backend::zero(const DeviceBuffer& dst, size_t offset, size_t bytes) {
  check_range(dst, offset, bytes, "zero");
  if (bytes) memory_->zero(static_cast<char*>(dst.data()) + offset, bytes);
}

const Plan& Backend::plan(std::string_view op, const ninfer_shape& s) {
  PlanKey key{std::string(op), s.tokens,         s.dims[0], s.dims[1],        s.dims[2],
              s.dims[3],       s.dtype,          s.max_seq_tokens, s.flags, s.kv_block_tokens};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    const auto start = std::chrono::steady_clock::now();
    try {
      it = plans_.emplace(std::move(key), planner_.plan(op, s)).first;
    } catch (const Error& e) {
      throw Error(fmt::format("cannot plan op '{}' for {}: {}", op, shape_text(s), e.what()));
    }
    // A shape met for the first time while serving is planned on the request's clock.
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (ms >= 0.2) spdlog::debug("planned {} for {} in {:.2f} ms", op, shape_text(s), ms);
  }
  return it->second;
}

bool Backend::has_variant(std::string_view op, const ninfer_shape& shape) const {
  for (const ninfer_variant* v : plugin_->variants_for(op))
    if ((v->dtype_mask & (1u << shape.dtype)) && (!v->supports || v->supports(v->ctx, &shape))) return true;
  return false;
}

int32_t Backend::code_layout(int64_t K, int64_t N, int64_t group, int32_t dtype) const {
  if (!ninfer_dtype_is_quantized(dtype) || !ninfer_quant_tiles_fit(N, K)) return NINFER_QUANT_LAYOUT_ROWS;
  // NINFER_CODE_TILES=0: row-major codes everywhere (docs/performance.md, "Diagnostic switches").
  if (const char* e = std::getenv("NINFER_CODE_TILES"); e && std::string_view(e) == "0") return NINFER_QUANT_LAYOUT_ROWS;
  const ninfer_shape rows{1, {K, N, group, NINFER_QUANT_LAYOUT_ROWS}, dtype, 0, 0};
  ninfer_shape tiles = rows;
  tiles.dims[3] = NINFER_QUANT_LAYOUT_TILES16;
  // A variant reads tiles only where its supports() says so: one without supports() takes every
  // shape it was written for, which predates the layout.
  auto reads_tiles = [&](const ninfer_variant* v) {
    return (v->dtype_mask & (1u << dtype)) && v->supports && v->supports(v->ctx, &tiles);
  };
  try {
    const Plan decode = planner_.plan(NINFER_OP_LINEAR, rows);
    if (!decode.v || !reads_tiles(decode.v)) return NINFER_QUANT_LAYOUT_ROWS;
  } catch (const Error&) {
    return NINFER_QUANT_LAYOUT_ROWS;
  }
  constexpr int64_t kLargestCall = int64_t{1} << 20; // the schedule tables' token range ends there
  for (int64_t t = 1; t <= kLargestCall; t *= 2) {
    tiles.tokens = t;
    bool any = false;
    for (const ninfer_variant* v : plugin_->variants_for(NINFER_OP_LINEAR)) any = any || reads_tiles(v);
    if (!any) return NINFER_QUANT_LAYOUT_ROWS;
  }
  return NINFER_QUANT_LAYOUT_TILES16;
}

void Backend::reserve_workspace(std::string_view op, const ninfer_shape& shape) {
  const size_t need = plan(op, shape).workspace_bytes;
  if (need <= workspace_.bytes()) return;
  workspace_ = DeviceBuffer(); // free first: the old contents are not needed
  workspace_ = allocate(need, MemoryUse::Workspace, "op workspace");
}

namespace {
// Token counts below `tokens` where a route (or the workspace of one) may change: every count up
// to the op's largest CTA token tile (a variant's shared memory grows with the tokens of a launch
// up to its tile, so its residency, and with it the planner's own route, can change at any count
// there), every power of two and every bucket edge of `op` in `table`.
std::vector<int64_t> smaller_token_counts(const std::vector<const ninfer_variant*>& variants,
                                          const ScheduleTable* table, std::string_view op, int64_t tokens) {
  std::vector<int64_t> counts;
  int64_t tile = 1;
  for (const ninfer_variant* v : variants) tile = std::max<int64_t>(tile, v->tokens_per_cta);
  for (int64_t t = 1; t < tokens && t <= tile; ++t) counts.push_back(t);
  for (int64_t t = 1; t < tokens; t *= 2) counts.push_back(t);
  if (table)
    for (const ScheduleEntry& e : table->entries)
      if (e.op == op)
        for (int64_t t : {e.tokens_min - 1, e.tokens_min, e.tokens_max, e.tokens_max + 1})
          if (t >= 1 && t < tokens) counts.push_back(t);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}
} // namespace

void Backend::reserve_workspace_up_to(std::string_view op, const ninfer_shape& shape) {
  if (!plan(op, shape).unfused) reserve_workspace(op, shape);
  for (int64_t t : smaller_token_counts(plugin_->variants_for(op), schedule_table(), op, shape.tokens)) {
    ninfer_shape s = shape;
    s.tokens = t;
    if (s.max_seq_tokens > t) s.max_seq_tokens = static_cast<int32_t>(t);
    try {
      // An unfused route's ops take their token count from the call's arguments, not the shape,
      // so they are sized only where a call of that size runs them (no shipped table routes a
      // fused op unfused below a fused route).
      if (plan(op, s).unfused) continue;
    } catch (const Error&) {
      continue;
    }
    reserve_workspace(op, s);
  }
}

namespace {
// Timing diagnostics only (docs/performance.md, "what each op costs in the graph"): the ops
// named in NINFER_TIMING_SKIP_OPS (comma-separated) are planned but never launched, so a
// benchmark measures the step without them. An entry `op@D0xD1` skips only the calls whose
// planning shape has those first two dims (linear@4096x4096: one projection of a model).
// Results are wrong while it is set; it says so.
bool skipped_for_timing(std::string_view op, const ninfer_shape& shape) {
  static const OpList skip =
      OpList::from_env("NINFER_TIMING_SKIP_OPS", "these ops are not launched, so every result is wrong");
  return skip.names(op, shape);
}
} // namespace

void Backend::execute_plan(const Plan& p, const void* args) {
  if (options_.plan_only || skipped_for_timing(p.op, p.shape)) return; // a dry run launches nothing
  if (p.workspace_bytes > workspace_.bytes())
    throw Error(fmt::format("op '{}' ({}) needs {} bytes of workspace for {}, but only {} were reserved; the "
                            "model must call reserve_workspace for its largest shapes at load time",
                            p.op, p.variant, p.workspace_bytes, shape_text(p.shape), workspace_.bytes()));
  execute(p, args, workspace_.data(), memory_->stream(), tickets_);
  // Kernel faults surface at the next synchronisation, far from the op that caused them. With
  // NINFER_SYNC_OPS=1 every op is waited for, so a fault names its op, variant and shape.
  static const bool sync_ops = [] {
    const char* v = std::getenv("NINFER_SYNC_OPS");
    return v && *v && std::string_view(v) != "0";
  }();
  if (sync_ops && !recording_) {
    try {
      memory_->synchronize();
    } catch (const Error& e) {
      throw Error(fmt::format("op '{}' ({} of plugin {}) for {} failed on {}: {}", p.op, p.variant, p.plugin,
                              shape_text(p.shape), device_.name, e.what()));
    }
  }
}

void Backend::run(std::string_view op, const ninfer_shape& shape, const void* args, const void* unfused_extra) {
  if (tally_ && run_depth_ == 0) {
    const auto start = std::chrono::steady_clock::now();
    ++run_depth_;
    try {
      run(op, shape, args, unfused_extra);
    } catch (...) {
      --run_depth_;
      throw;
    }
    --run_depth_;
    auto it = tally_->find(op);
    if (it == tally_->end()) it = tally_->emplace(std::string(op), 0.0).first;
    it->second += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return;
  }
  const Plan& p = plan(op, shape);
  if (sizing_) reserve_workspace_up_to(op, shape); // fewer tokens may take a fused route
  if (p.unfused) {
    // The ops it fuses, each planned (and, while sizing, reserved for) on its own.
    if (!sizing_ && skipped_for_timing(op, shape)) return;
    return run_unfused(*this, op, shape, args, unfused_extra);
  }
  if (sizing_) return;
  execute_plan(p, args);
}

void Backend::run_variant(std::string_view op, std::string_view variant, const ninfer_shape& shape,
                          const void* args) {
  std::string why_unknown;
  const ninfer_variant* v = plugin_->resolve_variant(device_, op, variant, &why_unknown); // on-demand ones built here
  if (!v)
    throw Error(fmt::format("plugin {} has no variant '{}' of op '{}'{}", plugin_->name(), variant, op,
                            why_unknown.empty() ? "" : ": " + why_unknown));
  const Plan p = planner_.plan_variant(*v, shape);
  if (p.workspace_bytes > workspace_.bytes()) { // tests and tools only: models reserve up front
    workspace_ = DeviceBuffer();
    workspace_ = allocate(p.workspace_bytes, MemoryUse::Workspace, "op workspace");
  }
  execute_plan(p, args);
}

void Backend::synchronize() { memory_->synchronize(); }

bool Backend::can_record() const { return memory_->can_record(); }

std::shared_ptr<const Backend::Recording> Backend::record(const std::function<void()>& work) {
  if (!can_record()) throw Error(fmt::format("{} cannot record launches (plugin {})", device_.name, plugin_->name()));
  memory_->begin_recording();
  recording_ = true;
  try {
    work();
  } catch (...) {
    recording_ = false;
    memory_->abort_recording();
    throw;
  }
  recording_ = false;
  return std::make_shared<Recording>(memory_->end_recording(), workspace_.data());
}

void Backend::replay(const Recording& r) {
  if (r.workspace_ != workspace_.data())
    throw Error("internal: a recording outlived the workspace it was recorded with; record it again");
  memory_->replay(r.exec_.get());
}

std::vector<const Plan*> Backend::cached_plans() const {
  std::vector<const Plan*> out;
  out.reserve(plans_.size());
  for (const auto& [key, plan] : plans_) out.push_back(&plan);
  return out;
}

MemoryReport Backend::memory() const {
  MemoryReport r = report_;
  r.free = memory_->free_bytes();
  return r;
}

} // namespace ninfer
