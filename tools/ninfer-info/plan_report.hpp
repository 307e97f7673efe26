// Rendering plans for people (a short table) and for machines (the --json object documented
// in docs/ninfer-info.md).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ninfer/planning/planner.hpp"

namespace ninfer::tools {

nlohmann::json plan_to_json(const Plan& p);
std::string plan_to_text(const Plan& p);

} // namespace ninfer::tools
