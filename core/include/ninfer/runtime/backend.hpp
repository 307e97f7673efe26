// A Backend is how model code runs ops: one plugin on one device, its planner, its memory.
//
//   Backend be(plugins, host_device());
//   DeviceBuffer w = be.allocate(bytes, MemoryUse::Weights, "layer 0 q_proj");
//   be.upload(w, 0, host_data, bytes);
//   be.reserve_workspace(NINFER_OP_GATED_DELTA_RULE, largest_shape);   // at load time
//   be.run(NINFER_OP_LINEAR, shape, &args);                            // plan (cached) + launch
//
// Model code names op contracts only; which variant runs is the planner's choice (the
// NINFER_UNFUSED_OPS override, the schedule table, then the planner's own route; a fused op the
// plugin cannot run takes the core's unfused form, ninfer/runtime/unfused_forms.hpp). All memory is allocated through the backend, up front:
// run() never allocates, and an op whose workspace was not reserved is an error, not a
// surprise allocation in the middle of a step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "ninfer/abi/plugin_abi.h"
#include "ninfer/planning/planner.hpp"
#include "ninfer/runtime/device_buffer.hpp"
#include "ninfer/runtime/memory_space.hpp"

namespace ninfer {

class PluginHost;
struct ScheduleTable;

struct BackendOptions {
  std::string plugin;             // force this plugin (by name); empty: the best-scoring one
  size_t memory_limit = 0;        // bytes the backend may allocate in all; 0: no limit
  const ScheduleTable* schedule = nullptr; // must outlive the backend; null: the default table below
  // With no `schedule`: a tuned table for this very device (ninfer-tune) when there is one,
  // else the plugin's built-in table; false: always the built-in table.
  bool tuned_schedule = true;
  // A dry run: allocations are counted but hold no memory (their addresses are never
  // dereferenced), copies and zeroing do nothing, and run() only reserves the workspace an op
  // would need, as under a SizingScope. A model "loaded" on such a backend tells what a real
  // load would allocate, part by part, before anything is (ninfer/models/memory_plan.hpp).
  bool plan_only = false;
};

struct MemoryReport {
  std::array<size_t, static_cast<size_t>(MemoryUse::Count)> in_use{};
  size_t total = 0;
  size_t peak = 0;
  size_t limit = 0; // 0: none
  size_t free = 0;  // bytes still free on the device when the report was made; 0: unknown
  // Weight bytes by storage format (allocate_weights): "bfloat16", "float32", "gptq int4 g128", ...
  std::map<std::string, size_t> weights_by_format;
  // The live allocations by size (bytes -> count): what the device allocator's rounding is
  // estimated from (allocator_overhead).
  std::map<size_t, size_t> allocation_sizes;
  // "weights 1.2 GiB (gptq int4 g128 1.0 GiB, bfloat16 210 MiB), kv-cache 512 MiB, ...; total ..."
  // (the weights' formats when there are several)
  std::string describe() const;
};

// "512 B", "1.5 KiB", "12.0 MiB", "1.25 GiB": memory sizes in messages.
std::string format_bytes(size_t bytes);

// Bytes the device's allocator is estimated to hold beyond the buffers themselves, for the
// allocations of `r` on a device of `device_kind` (ninfer_device_kind). CUDA: cudaMalloc maps
// device memory in 2 MiB pages, so a buffer of 1 MiB or more is taken as rounded up to whole
// pages and a smaller one as packed with others at 512-byte alignment. Host: the 64-byte
// alignment of HostMemorySpace. An estimate: the driver does not report it per allocation.
size_t allocator_overhead(const MemoryReport& r, int32_t device_kind);

class Backend {
 public:
  // Chooses the plugin for `device` from `plugins` (which must outlive the backend). Throws
  // ninfer::Error when no plugin may run there, naming each plugin's reason.
  Backend(const PluginHost& plugins, const ninfer_device_info& device, BackendOptions options = {});
  // Uses `plugin` on `device` (tests, tools).
  Backend(const LoadedPlugin& plugin, const ninfer_device_info& device, BackendOptions options = {});
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const LoadedPlugin& plugin() const { return *plugin_; }
  const ninfer_device_info& device() const { return device_; }
  const Planner& planner() const { return planner_; }
  // The schedule table the planner uses (a dry run of a load plans with the same one).
  const ScheduleTable* schedule_table() const;
  // BackendOptions::plan_only: nothing is allocated, copied or launched.
  bool plan_only() const { return options_.plan_only; }
  // BackendOptions::memory_limit (0: none).
  size_t memory_limit() const { return options_.memory_limit; }

  // --- memory -------------------------------------------------------------------------
  // Throws ninfer::Error when the memory limit or the device would be exceeded; the message
  // names `what`, the request and what is already allocated.
  DeviceBuffer allocate(size_t bytes, MemoryUse use, std::string_view what);
  // Weights stored in `format` ("bfloat16", "gptq int4 g128"): counted by format in memory().
  DeviceBuffer allocate_weights(size_t bytes, std::string_view format, std::string_view what);
  void upload(const DeviceBuffer& dst, size_t offset, const void* src, size_t bytes);
  void download(const DeviceBuffer& src, size_t offset, void* dst, size_t bytes);
  // A download the host does not wait for, into result slot `slot` (of MemorySpace::kResultSlots;
  // page-locked on a device) at `slot_offset`: downloaded(slot) waits for the copies into that
  // slot only and returns its bytes, valid until the slot's next download. A slot holds
  // MemorySpace::kMinResultBytes until reserve_results grows every slot to `bytes` (at load).
  void reserve_results(size_t bytes);
  void download_async(const DeviceBuffer& src, size_t offset, size_t bytes, size_t slot, size_t slot_offset = 0);
  const void* downloaded(size_t slot);
  // A download from an address inside one of this backend's buffers (rows an op was given, where
  // the caller holds the pointer, not the buffer), waiting for the ops before it. For observers
  // of model code (ninfer/models/linear_observer.hpp); nothing checks the range.
  void download_from(const void* src, void* dst, size_t bytes);
  // Device to device, ordered with the ops (the host does not wait).
  void copy(const DeviceBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset, size_t bytes);
  // Host memory for spilled device bytes (page-locked on a CUDA device; not in memory()): spill
  // copies device bytes into it and unspill back, both ordered with the ops, the host not
  // waiting (host bytes a spill wrote are for unspill, which the stream orders after it).
  // allocate_host throws ninfer::Error naming `what` when the memory cannot be had.
  HostBuffer allocate_host(size_t bytes, std::string_view what);
  void spill(const HostBuffer& dst, size_t dst_offset, const DeviceBuffer& src, size_t src_offset, size_t bytes);
  void unspill(const DeviceBuffer& dst, size_t dst_offset, const HostBuffer& src, size_t src_offset, size_t bytes);
  void zero(const DeviceBuffer& dst, size_t offset, size_t bytes);
  MemoryReport memory() const;

  // --- ops ------------------------------------------------------------------------------
  // Grows the shared workspace so `op` planned for `shape` can run. Call while loading, for
  // the largest shape each op will see.
  void reserve_workspace(std::string_view op, const ninfer_shape& shape);
  // reserve_workspace for `shape` and for the same call with every token count below it where
  // the route or its workspace may change: the edges of the schedule table's buckets for `op`
  // and the powers of two. A table may route fewer tokens to a variant whose workspace the
  // largest call's route does not need (argmax's row_split for 1-16 rows), so sizing only the
  // largest steps is not enough. Skipped: a smaller shape no variant can take (no step issues
  // it) and a smaller count routed to the ops a fused op fuses (they are sized where a call
  // runs them; their token count is in the call's arguments).
  void reserve_workspace_up_to(std::string_view op, const ninfer_shape& shape);
  size_t workspace_bytes() const { return workspace_.bytes(); }
  // The plan for (op, shape), cached.
  const Plan& plan(std::string_view op, const ninfer_shape& shape);
  // Every plan made so far (what ran: tools report variants and schedule entries), in key order.
  std::vector<const Plan*> cached_plans() const;
  // Whether the plugin has a variant of `op` that supports `shape` (its dtype and dims), whatever
  // the route: for tests and tools. Model code runs the op and the planner picks its route.
  bool has_variant(std::string_view op, const ninfer_shape& shape) const;
  // The layout (NINFER_QUANT_LAYOUT_*, quant_weight.h) a loader should give the codes of an
  // [N, K] quantized matrix (`group`: its planning group, linear.h): tiles where the route of a
  // one-token call on row-major codes reads tiles as well (the lean decode GEMVs, whose warps
  // then read one contiguous block a step) and every token count has a variant that reads them;
  // else row-major (always with NINFER_CODE_TILES=0). The decision follows the routes, so a
  // table or plugin change moves it.
  int32_t code_layout(int64_t K, int64_t N, int64_t group, int32_t dtype) const;
  // Plans and runs `op`; `args` is the op's argument struct (ninfer/abi/ops/<op>.h). Where the
  // planner routes a fused op to its unfused form, the core runs the ops it fuses instead, with
  // `unfused_extra` (ninfer/runtime/unfused_forms.hpp: the rows norm_linear's and
  // gated_delta_step's forms need; ignored otherwise). Throws ninfer::Error naming op, variant
  // and shape when planning or a launch fails.
  void run(std::string_view op, const ninfer_shape& shape, const void* args, const void* unfused_extra = nullptr);
  // Runs one named variant of `op` (tests compare variants; tools time them). Unlike run(),
  // it grows the workspace when the variant needs more: it is not for model code.
  void run_variant(std::string_view op, std::string_view variant, const ninfer_shape& shape, const void* args);
  // Waits for everything issued so far.
  void synchronize();
  // The stream the ops launch on (a cudaStream_t for CUDA plugins): for tests that put a kernel
  // of their own between two ops.
  void* stream() const;

  // --- recordings (CUDA graphs) -------------------------------------------------------------
  // A sequence of launches recorded once and replayed as one unit: no host work per kernel.
  class Recording {
   public:
    Recording(std::shared_ptr<void> exec, const void* workspace) : exec_(std::move(exec)), workspace_(workspace) {}

   private:
    friend class Backend;
    std::shared_ptr<void> exec_;
    const void* workspace_; // the workspace the launches were recorded with
  };
  // False on backends that run ops on the host.
  bool can_record() const;
  // Whether run() is recording now (inside record()), or only sizing (a SizingScope lives):
  // either way nothing executes and no copy to the host may happen.
  bool recording() const { return recording_; }
  // Host milliseconds of each op's planning and launch, added to `tally` by op name while it is
  // set (null: none kept). A step that takes long to queue (ninfer-serve -v logs a prompt
  // chunk's) then names where its host time went; the ops an unfused op runs count as it.
  using HostTally = std::map<std::string, double, std::less<>>;
  void set_host_tally(HostTally* tally) { tally_ = tally; }
  bool sizing() const { return sizing_; }
  // Runs `work` with the backend recording: its ops are planned and their launches recorded,
  // nothing executes. Throws ninfer::Error naming what could not be recorded (the backend is
  // then usable as before). `work` must not copy to or from the host.
  std::shared_ptr<const Recording> record(const std::function<void()>& work);
  // Launches a recording. Throws if the workspace it was recorded with has since been replaced.
  void replay(const Recording& r);

  // While a SizingScope lives, run() launches nothing: it reserves the workspace the op would
  // need for its shape, and for the same call with fewer tokens (reserve_workspace_up_to), and
  // returns. A model sizes its workspace by running its largest steps once this way at load
  // time (argument pointers are never dereferenced).
  class SizingScope {
   public:
    explicit SizingScope(Backend& be) : be_(be), was_(be.sizing_) { be.sizing_ = true; }
    ~SizingScope() { be_.sizing_ = was_; }
    SizingScope(const SizingScope&) = delete;
    SizingScope& operator=(const SizingScope&) = delete;

   private:
    Backend& be_;
    bool was_;
  };

 private:
  friend class DeviceBuffer;
  friend class HostBuffer;
  void release(DeviceBuffer& b) noexcept;
  void release(HostBuffer& b) noexcept;
  void execute_plan(const Plan& p, const void* args);

  using PlanKey = std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, int64_t, int32_t, int32_t, uint32_t, int32_t>;
  const LoadedPlugin* plugin_;
  ninfer_device_info device_;
  BackendOptions options_;
  std::unique_ptr<ScheduleTable> builtin_table_; // when options_.schedule is null: tuned or built-in
  Planner planner_;
  std::unique_ptr<MemorySpace> memory_;
  MemoryReport report_;
  std::map<PlanKey, Plan, std::less<>> plans_;
  DeviceBuffer workspace_;
  // The counters every launch of this backend may share (ninfer_launch.tickets): its own, so
  // no launch of another backend on another stream takes them. Null in a plan-only backend.
  static constexpr size_t kTicketBytes = sizeof(uint32_t) * NINFER_LAUNCH_TICKETS;
  uint32_t* tickets_ = nullptr;
  bool sizing_ = false;
  bool recording_ = false;
  HostTally* tally_ = nullptr;
  int run_depth_ = 0; // Backend::run's nesting (an unfused op's ops)
};

} // namespace ninfer
