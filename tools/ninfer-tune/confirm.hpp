// The end-to-end check of a tuned table: a variant that wins in isolation can lose inside a
// forward pass (an extra launch, a different overlap with its neighbours). For every measured
// bucket, the model runs a forward pass of that many tokens with the built-in table and with the
// candidate; a bucket whose tuned choice is slower end to end goes back to the built-in choice.
#pragma once

#include "ninfer/checkpoint/checkpoint.hpp"
#include "ninfer/plugin_host/plugin_host.hpp"
#include "ninfer/planning/schedule_table.hpp"
#include "tuner.hpp"

namespace ninfer::tools {

// Fills each bucket's end-to-end times and clears tuned_variant (and its matrices) where the
// tuned table was slower.
void confirm_end_to_end(TuneRun& run, const PluginHost& plugins, const ninfer_device_info& device,
                        const std::string& plugin, const Checkpoint& ck, const ScheduleTable& builtin,
                        const ScheduleDevice& key, const TuneOptions& o);

} // namespace ninfer::tools
