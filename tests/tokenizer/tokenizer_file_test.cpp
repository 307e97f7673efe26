// Loading tokenizer.json: both merge notations, merge order, added-token matching, and the errors
// a user sees for a missing, malformed or unsupported file. Uses small tokenizers written here,
// whose expected ids follow from the BPE rules by hand.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ninfer/support/error.hpp"
#include "hostile_files.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "temp_dir.hpp"
#include "test_support.hpp"

namespace {

using namespace ninfer;
using nlohmann::json;
using test::TempDir;
namespace fs = std::filesystem;

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {  // the byte-level alphabet stays below U+0800
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's byte-to-character table, written from its definition: printable bytes stand for
// themselves, the rest take U+0100.. in order. Ids 0..255 are the bytes.
json byte_vocab() {
  json vocab = json::object();
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    vocab[utf8(printable ? static_cast<char32_t>(b) : next++)] = b;
  }
  return vocab;
}

json tiny_tokenizer(const json& merges, json extra_vocab, json added = json::array()) {
  json vocab = byte_vocab();
  for (auto& [k, v] : extra_vocab.items()) vocab[k] = v;
  return json{
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern", {{"Regex", " ?[a-z<>]+|\\s+"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no ninfer::Error thrown)";
}

TEST(TokenizerFile, StringAndArrayMergesGiveTheSameTokenizer) {
  TempDir dir;
  const json extra{{"ab", 256}, {"abc", 257}, {"Ġab", 258}};
  const auto a = Tokenizer::load(dir.write("strings.json", tiny_tokenizer({"a b", "ab c", "Ġ ab"}, extra).dump()));
  const auto b = Tokenizer::load(
      dir.write("arrays.json", tiny_tokenizer(json::array({json::array({"a", "b"}), json::array({"ab", "c"}), json::array({"Ġ", "ab"})}), extra).dump()));
  // "abc abx": "abc" -> a,b,c -> ab,c -> abc; " abx" -> Ġ,a,b,x -> Ġ,ab,x -> Ġab,x.
  const std::vector<int32_t> want{257, 258, 'x'};
  EXPECT_EQ(a.encode("abc abx"), want);
  EXPECT_EQ(b.encode("abc abx"), want);
  EXPECT_EQ(a.decode(want), "abc abx");
}

TEST(TokenizerFile, LowerRankedMergesApplyFirstAndTiesGoLeftmost) {
  TempDir dir;
  const json extra{{"ab", 256}, {"bc", 257}, {"aa", 258}};
  // With "b c" ranked first, "abc" becomes a + bc; with "a b" first, ab + c.
  EXPECT_EQ(Tokenizer::load(dir.write("bc.json", tiny_tokenizer({"b c", "a b"}, extra).dump())).encode("abc"),
            (std::vector<int32_t>{'a', 257}));
  EXPECT_EQ(Tokenizer::load(dir.write("ab.json", tiny_tokenizer({"a b", "b c"}, extra).dump())).encode("abc"),
            (std::vector<int32_t>{256, 'c'}));
  // "aaa" with the single merge "a a": the leftmost pair merges first -> aa + a.
  EXPECT_EQ(Tokenizer::load(dir.write("aa.json", tiny_tokenizer({"a a"}, extra).dump())).encode("aaa"),
            (std::vector<int32_t>{258, 'a'}));
}

TEST(TokenizerFile, AddedTokensMatchLeftmostThenLongest) {
  TempDir dir;
  const json added = json::array({{{"id", 300}, {"content", "<x>"}, {"special", true}},
                                  {{"id", 301}, {"content", "<x>y"}, {"special", false}},
                                  {{"id", 302}, {"content", "x>y"}, {"special", false}}});
  const auto tok = Tokenizer::load(dir.write("added.json", tiny_tokenizer(json::array(), json::object(), added).dump()));
  EXPECT_EQ(tok.encode("<x>y"), (std::vector<int32_t>{301}));         // longest at the same start
  EXPECT_EQ(tok.encode("a<x>b"), (std::vector<int32_t>{'a', 300, 'b'}));
  EXPECT_EQ(tok.encode("<<x>y"), (std::vector<int32_t>{'<', 301}));   // leftmost start wins over x>y
  EXPECT_EQ(tok.vocab_size(), 303);
  EXPECT_FALSE(tok.has_token(280));  // a gap between the vocabulary and the added tokens
  EXPECT_THROW(tok.decode(std::vector<int32_t>{280}), Error);
  EXPECT_EQ(tok.decode(std::vector<int32_t>{'a', 280, 300}, {.skip_special_tokens = true, .skip_unknown_ids = true}), "a");
}

TEST(TokenizerFile, AFolderIsSearchedForTokenizerJson) {
  TempDir dir;
  dir.write("tokenizer.json", tiny_tokenizer(json::array(), json::object()).dump());
  EXPECT_EQ(Tokenizer::load(dir.path()).encode("hi"), (std::vector<int32_t>{'h', 'i'}));
}

TEST(TokenizerFile, MissingFileIsAClearError) {
  const std::string msg = error_of([] { Tokenizer::load("/nonexistent/dir/tokenizer.json"); });
  EXPECT_NE(msg.find("/nonexistent/dir/tokenizer.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  TempDir dir;
  const std::string folder = error_of([&] { Tokenizer::load(dir.path()); });
  EXPECT_NE(folder.find("has no tokenizer.json"), std::string::npos) << folder;
}

TEST(TokenizerFile, MalformedJsonNamesTheFile) {
  TempDir dir;
  const auto file = dir.write("broken.json", "{\"model\": {\"type\": \"BPE\", ");
  const std::string msg = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(TokenizerFile, UnsupportedOrInconsistentContentNamesTheKey) {
  TempDir dir;
  struct Case {
    const char* name;
    std::function<void(json&)> spoil;
    const char* expected;
  };
  const std::vector<Case> cases{
      {"wordpiece", [](json& j) { j["model"]["type"] = "WordPiece"; }, "model.type"},
      {"merge", [](json& j) { j["model"]["merges"] = {"q zz"}; }, "model.merges[0]"},
      {"bad_merge", [](json& j) { j["model"]["merges"] = {"abc"}; }, "model.merges[0]"},
      {"no_vocab", [](json& j) { j["model"].erase("vocab"); }, "vocab"},
      {"vocab_array", [](json& j) { j["model"]["vocab"] = json::array({"a"}); }, "model.vocab"},
      {"short_pair", [](json& j) { j["model"]["merges"] = json::array({json::array({"a"})}); }, "model.merges[0]"},
      {"merge_number", [](json& j) { j["model"]["merges"] = json::array({"a b", 7}); }, "model.merges[1]"},
      {"missing_byte", [](json& j) { j["model"]["vocab"].erase("a"); }, "0x61"},
      {"lstrip", [](json& j) { j["added_tokens"] = {{{"id", 400}, {"content", "<s>"}, {"lstrip", true}}}; },
       "added_tokens[0].lstrip"},
      {"normalizer", [](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, "normalizer.type"},
      {"pre_tokenizer", [](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "pre_tokenizer.type"},
      {"regex", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
       "does not compile"},
      {"decoder", [](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, "decoder.type"},
      {"id", [](json& j) { j["model"]["vocab"]["zz"] = "seven"; }, "model.vocab.zz"},
  };
  for (const Case& c : cases) {
    json j = tiny_tokenizer(json::array(), json::object());
    c.spoil(j);
    const auto file = dir.write(std::string(c.name) + ".json", j.dump());
    const std::string msg = error_of([&] { Tokenizer::load(file); });
    EXPECT_NE(msg.find(c.expected), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find(file.string()), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(TokenizerFile, InvalidUtf8TextAndUnknownIdsAreErrors) {
  TempDir dir;
  const auto tok = Tokenizer::load(dir.write("t.json", tiny_tokenizer(json::array(), json::object()).dump()));
  const std::string msg = error_of([&] { tok.encode(std::string("ok\xC3(", 4)); });
  EXPECT_NE(msg.find("not valid UTF-8 at byte 2"), std::string::npos) << msg;
  const std::string id_msg = error_of([&] { tok.decode(std::vector<int32_t>{1, 999}); });
  EXPECT_NE(id_msg.find("999"), std::string::npos) << id_msg;
  EXPECT_THROW(tok.decode(std::vector<int32_t>{-1}), Error);
}

// Ids size the id -> token tables, so a huge one must be refused before anything is allocated.
TEST(TokenizerFile, HugeTokenIdsAreRefusedNamingKeyAndLimit) {
  TempDir dir;
  json j = tiny_tokenizer(json::array(), json::object(),
                          json::array({{{"id", 1000000000}, {"content", "<big>"}, {"special", true}}}));
  auto file = dir.write("added.json", j.dump());
  std::string msg = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("added_tokens[0].id"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4194304"), std::string::npos) << msg;
  j = tiny_tokenizer(json::array(), json{{"zz", 1000000000}});
  file = dir.write("vocab.json", j.dump());
  msg = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.vocab.zz"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4194304"), std::string::npos) << msg;
  // The largest allowed id loads.
  j = tiny_tokenizer(json::array(), json::object(), json::array({{{"id", 4194303}, {"content", "<top>"}}}));
  EXPECT_EQ(Tokenizer::load(dir.write("top.json", j.dump())).token_id("<top>"), 4194303);
}

TEST(TokenizerFile, DeepNestingIsRefused) {
  TempDir dir;
  json j = tiny_tokenizer(json::array(), json::object());
  std::string text = j.dump();
  text.insert(text.size() - 1, ", \"x\": " + std::string(100000, '[') + std::string(100000, ']'));
  const auto file = dir.write("deep.json", text);
  const std::string msg = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(msg.find(file.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("nested"), std::string::npos) << msg;
}

TEST(TokenizerFile, MalformedStepListsNameTheKey) {
  TempDir dir;
  json j = tiny_tokenizer(json::array(), json::object());
  j["pre_tokenizer"]["pretokenizers"] = json{{"a", 1}};
  auto file = dir.write("steps.json", j.dump());
  std::string msg = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(msg.find("pre_tokenizer.pretokenizers"), std::string::npos) << msg;
  j = tiny_tokenizer(json::array(), json::object());
  j["normalizer"] = json{{"type", "Sequence"}, {"normalizers", 5}};
  file = dir.write("norm.json", j.dump());
  msg = error_of([&] { Tokenizer::load(file); });
  EXPECT_NE(msg.find("normalizer.normalizers"), std::string::npos) << msg;
}

TEST(TokenizerFile, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir.path() / "tokenizer.json";
  test::make_fifo(fifo);
  for (const fs::path& p : {fifo, dir.path()}) {
    const std::string msg = test::error_within(10, [&] { Tokenizer::load(p); }, fifo);
    EXPECT_NE(msg.find(fifo.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
  }
}

} // namespace
