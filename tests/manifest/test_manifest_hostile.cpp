// Manifests written to hurt: huge scalars, alias bombs, deep nesting, duplicate keys and files
// that are not files. Each must end in an ninfer::Error naming the file, the line or key and
// the limit, within seconds and without building anything the size of the expansion.
#include <gtest/gtest.h>

#include <string>

#include "hostile_files.hpp"
#include "manifest_test_util.hpp"

namespace ninfer::test {
namespace {

namespace fs = std::filesystem;

class ManifestHostile : public ::testing::Test {
 protected:
  void SetUp() override { dir_.folder("ck"); }
  fs::path manifest(const std::string& text) { return dir_.write("m.yaml", text); }
  // The error of loading `f`, which must come within 10 s.
  static std::string error(const fs::path& f) {
    return error_within(10, [&] { load_manifest(f); }, f);
  }
  static void expect_has(const std::string& msg, std::initializer_list<std::string> parts) {
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg.substr(0, 400);
  }
  ScratchDir dir_;
};

TEST_F(ManifestHostile, HundredThousandDigitScalarIsRefusedForItsLength) {
  const auto f = manifest("checkpoint: ck\nruntime:\n  max_context: " + std::string(100000, '7') + "\n");
  const std::string msg = error(f);
  expect_has(msg, {f.string() + ":3", "runtime.max_context", "100000 characters", "65536"});
  EXPECT_LT(msg.size(), 1000u) << "the message repeats the value";
}

// Below the length limit a long number still resolves without recursion: it is too large for an
// integer, so the schema refuses it as not a whole number, quoting only the start of it.
TEST_F(ManifestHostile, LongNumbersBelowTheLimitGetTheSchemaMessage) {
  auto f = manifest("checkpoint: ck\nruntime:\n  max_context: " + std::string(60000, '9') + "\n");
  std::string msg = error(f);
  expect_has(msg, {f.string() + ":3", "runtime.max_context", "whole number"});
  EXPECT_LT(msg.size(), 1000u);
  f = manifest("checkpoint: ck\nsampling:\n  top_p: 0." + std::string(60000, '5') + "e" + std::string(30000, '1') + "\n");
  msg = error(f);
  expect_has(msg, {f.string() + ":3", "sampling.top_p"});
  EXPECT_LT(msg.size(), 1000u);
}

TEST_F(ManifestHostile, AliasBombIsRefusedBeforeItExpands) {
  // 9^9 (387 million) scalars from about 500 bytes.
  std::string text = "checkpoint: ck\nl0: &l0 [x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 8; ++level) {
    const std::string prev = "*l" + std::to_string(level - 1);
    text += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 9; ++i) text += (i ? ", " : "") + prev;
    text += "]\n";
  }
  ASSERT_LT(text.size(), 600u);
  const auto f = manifest(text);
  expect_has(error(f), {f.string(), "aliases", "nodes", "limit"});
}

TEST_F(ManifestHostile, DeepNestingIsRefused) {
  auto f = manifest("checkpoint: ck\nx: " + std::string(100, '[') + std::string(100, ']') + "\n");
  expect_has(error(f), {f.string() + ":2", "x", "nested", "64"});
  // Deeper still, yaml-cpp's own guard stops the parser.
  f = manifest("checkpoint: ck\nx: " + std::string(100000, '[') + std::string(100000, ']') + "\n");
  expect_has(error(f), {f.string() + ":2"});
}

TEST_F(ManifestHostile, DuplicateKeyNamesTheKeyAndBothLines) {
  auto f = manifest("checkpoint: ck\nruntime:\n  max_concurrency: 2\n  prefill_chunk: 64\n  max_concurrency: 100000\n");
  std::string msg = error(f);
  expect_has(msg, {f.string() + ":5", "runtime.max_concurrency", "duplicate key", "line 3"});
  // The same key quoted differently is still the same key.
  f = manifest("checkpoint: elsewhere\nname: a\n\"checkpoint\": ck\n");
  msg = error(f);
  expect_has(msg, {f.string() + ":3", "checkpoint", "duplicate key", "line 1"});
}

// Found by fuzz/manifest_fuzz.cpp: the schema validator's length check decoded invalid UTF-8
// with an out-of-bounds table read.
TEST_F(ManifestHostile, InvalidUtf8IsRefusedWithItsLine) {
  const auto f = manifest("checkpoint: ck\nname: \"ab\x86\xff\"\n");
  expect_has(error(f), {f.string() + ":2", "not valid UTF-8", "byte 24"});
  // Overlong forms and surrogates are not UTF-8 either; real multi-byte text is.
  EXPECT_NE(error(manifest("checkpoint: ck\nname: \xC0\xAF\n")).find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(error(manifest("checkpoint: ck\nname: \xED\xA0\x80\n")).find("not valid UTF-8"), std::string::npos);
  EXPECT_EQ(load_manifest(manifest("checkpoint: ck\nname: \xC3\xA9t\xC3\xA9 \xF0\x9F\x99\x82\n")).name,
            "\xC3\xA9t\xC3\xA9 \xF0\x9F\x99\x82");
}

TEST_F(ManifestHostile, NonScalarKeyIsRefused) {
  const auto f = manifest("checkpoint: ck\n? [a, b]\n: c\n");
  expect_has(error(f), {f.string() + ":2", "key"});
}

TEST_F(ManifestHostile, FifoInsteadOfAManifestIsRefusedWithoutBlocking) {
  const fs::path f = dir_.path() / "fifo.yaml";
  make_fifo(f);
  expect_has(error_within(10, [&] { load_manifest(f); }, f), {f.string(), "not a regular file"});
}

TEST_F(ManifestHostile, OversizedManifestIsRefusedBeforeReading) {
  const auto f = manifest("checkpoint: ck\n# " + std::string(17u << 20, 'x') + "\n");
  expect_has(error(f), {f.string(), "16 MiB"});
}

TEST_F(ManifestHostile, FifoTokenizerIsRefusedWithoutBlocking) {
  make_fifo(dir_.path() / "ck" / "tok.json");
  const auto f = manifest("checkpoint: ck\ntokenizer: ck/tok.json\n");
  // A FIFO is not a tokenizer file: the manifest's own check refuses it.
  expect_has(error_within(10, [&] { load_manifest(f); }, dir_.path() / "ck" / "tok.json"), {f.string() + ":2", "tokenizer"});
}

} // namespace
} // namespace ninfer::test
