// What every ninfer tool's command line shares: the exit codes, --version, --threads, parsing
// that gives every command-line problem the same exit code, and the top-level error handler
// (docs/cli.md, "Exit codes").
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "ninfer/models/model_setup.hpp"
#include "ninfer/support/error.hpp"

namespace ninfer {
class PluginHost;
}

namespace ninfer::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;       // the model, a file, the input, the device, or a bug
inline constexpr int kExitUsage = 2;         // the command line: unknown flag, bad value, flags that clash
inline constexpr int kExitInterrupted = 130; // Ctrl-C (128 + SIGINT, as shells report it)

// A command-line problem found after parsing (flags that do not go together, a value out of
// range): run_tool prints it and exits kExitUsage, before anything is loaded.
class UsageError : public Error {
 public:
  using Error::Error;
};

// The build's version: the project version, with `git describe` of the tree it was configured
// from where there was one ("0.1.0 (git 413b282-dirty)").
const char* build_version();

// --version: prints "TOOL VERSION" on stdout and exits 0.
void add_version_flag(CLI::App& app, const std::string& tool);

// --threads N: the CPU plugin's threads. apply_threads sets NINFER_CPU_THREADS (which the plugin
// reads when it starts its pool) and must run before any plugin is used; a value < 1 is a
// UsageError.
CLI::Option* add_threads_option(CLI::App& app, std::optional<int>& threads);
void apply_threads(const std::optional<int>& threads);

// Checks of flag values that say what they expect, in the tool's words (CLI11's own ranges print
// the largest double): GiB of memory, finite, > 0 and at most 1 PiB; a whole number >= 1.
CLI::Validator gib_amount();
// The number `s` starts with, into `v`; how many characters it takes (0: it starts with none).
size_t leading_number(const std::string& s, double& v);
CLI::Validator positive_count();

// --memory-limit GIB and --kv-capacity auto|TOKENS (ninfer-run, ninfer-serve, ninfer-bench;
// docs/memory.md): a value CLI11 refuses is a command-line problem.
void add_memory_options(CLI::App& app, std::optional<double>& memory_limit, std::optional<std::string>& kv_capacity);

// The flags that choose where and how a model loads, as ninfer-run and ninfer-serve take them:
// --device, --plugin-dir, --plugin, --threads, --dtype and --kv-dtype (overriding the manifest).
struct LoadFlags {
  std::string& device;
  std::string& plugin_dir;
  std::string& plugin;
  std::optional<int>& threads;
  std::optional<std::string>& dtype;
  std::optional<std::string>& kv_dtype;
};
void add_load_options(CLI::App& app, const LoadFlags& f);

// --spec none|mtp, --draft-tokens K and --draft-vocab N (ninfer-run, ninfer-serve, ninfer-bench;
// docs/speculative.md). check_spec_options: a draft option with --spec none is a UsageError.
void add_spec_options(CLI::App& app, SpecOverrides& spec);
void check_spec_options(const SpecOverrides& spec);

// Parses the command line. Returns the exit code when the tool must stop: 0 after --help or
// --version, kExitUsage for anything CLI11 refuses (its message on stderr, naming the tool);
// std::nullopt to go on.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, const std::string& tool);

// Runs the tool's body: a UsageError prints "TOOL: error: ..." and returns kExitUsage, any other
// ninfer::Error "TOOL: error: ..." and kExitFailure, anything else "TOOL: internal error: ..."
// and kExitFailure.
int run_tool(const std::string& tool, const std::function<int()>& body);

// "--plugin NAME: no plugin of that name in DIR (available: cpu, cuda-sm90)".
std::string no_such_plugin(const std::string& name, const std::filesystem::path& dir, const PluginHost& plugins);

// "TOOL: warning: MESSAGE" on stderr: a flag that has no effect as given.
void warn(const std::string& tool, const std::string& message);

} // namespace ninfer::tools
