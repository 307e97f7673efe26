// ninfer-tune's outputs: the schedule table built from the measurements, and the summary
// (op, bucket, built-in choice, tuned choice, speed-up, excluded variants) as text or JSON.
#pragma once

#include "ninfer/planning/schedule_table.hpp"
#include "tuner.hpp"

namespace ninfer::tools {

// Tuned entries first (adjacent buckets with the same choice merged; a bucket covers the
// token counts above the previous bucket up to its own), then the built-in entries, which
// keep serving every op and token count that was not measured.
ScheduleTable tuned_table(const TuneRun& run, const ScheduleTable& builtin, const ScheduleDevice& device);

void print_summary(const TuneRun& run);
void print_summary_json(const TuneRun& run, const ScheduleTable& table, const std::string& written_to);

} // namespace ninfer::tools
