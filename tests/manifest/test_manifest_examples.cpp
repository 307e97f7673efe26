// The example manifests in models/ and the YAML examples in docs/manifest.md are valid: each
// loads once the folders it points at exist.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "manifest_test_util.hpp"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

fs::path source_root() {
  const char* s = std::getenv("NINFER_SOURCE_DIR");
  return s && *s ? fs::path(s) : fs::path(NINFER_TEST_SOURCE_DIR);
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loads `text` as models/<file> in a scratch tree where its checkpoint folder (and tokenizer
// file, if it names one) exist.
Manifest load_in_scratch(const std::string& text, const std::string& file) {
  ScratchDir dir;
  const fs::path manifest = dir.write("models/" + file, text);
  const YAML::Node doc = YAML::Load(text);
  fs::create_directories(manifest.parent_path() / doc["checkpoint"].as<std::string>());
  if (doc["tokenizer"]) {
    const fs::path tok = manifest.parent_path() / doc["tokenizer"].as<std::string>();
    fs::create_directories(tok.parent_path());
    std::ofstream(tok) << "{}";
  }
  return load_manifest(manifest);
}

TEST(ManifestExamples, EveryModelsYamlLoads) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(source_root() / "models")) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    const Manifest m = load_in_scratch(read(entry.path()), entry.path().filename().string());
    EXPECT_FALSE(m.name.empty());
    // The documented convention: ../checkpoints/<folder>.
    EXPECT_EQ(m.checkpoint.parent_path().filename(), "checkpoints");
    ++count;
  }
  EXPECT_GE(count, 3) << "models/ should hold qwen3 and qwen3_5 examples";
}

TEST(ManifestExamples, EveryYamlBlockInTheReferenceLoads) {
  const std::string doc = read(source_root() / "docs" / "manifest.md");
  int count = 0;
  for (size_t pos = doc.find("```yaml\n"); pos != std::string::npos; pos = doc.find("```yaml\n", pos)) {
    pos += 8;
    const size_t end = doc.find("```", pos);
    ASSERT_NE(end, std::string::npos);
    const std::string block = doc.substr(pos, end - pos);
    SCOPED_TRACE(block);
    load_in_scratch(block, "example.yaml");
    ++count;
    pos = end + 3;
  }
  EXPECT_GE(count, 2);
}

} // namespace
} // namespace ninfer::test
