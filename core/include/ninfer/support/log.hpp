// Logging goes to stderr (stdout is for the tools' results: text, JSON, generated tokens).
#pragma once

namespace ninfer {

void init_logging(bool verbose);

} // namespace ninfer
