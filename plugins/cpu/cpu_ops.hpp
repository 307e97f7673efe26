// Registration functions of the CPU reference plugin's op families.
#pragma once

#include "ninfer/abi/plugin_abi.h"

namespace ninfer::cpu_plugin {

int32_t register_gdn_gating(const ninfer_registrar* r);

} // namespace ninfer::cpu_plugin
