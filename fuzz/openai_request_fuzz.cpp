// A request body through ninfer-serve's OpenAI request parser, against the tiny-qwen3 fixture
// on the CPU plugin with a small ChatML tokenizer. The first byte picks the endpoint (even:
// /v1/chat/completions, odd: /v1/completions), the rest is the body. The server answers an
// ApiError with its status and anything else with 500, so only ApiError may come out.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "api_error.hpp"
#include "fuzz_support.hpp"
#include "loaded_model.hpp"
#include <spdlog/spdlog.h>
#include "openai_request.hpp"

namespace {

using nlohmann::json;

// Byte-level vocabulary (GPT-2's byte -> character table) plus ChatML's added tokens.
std::string tokenizer_json() {
  auto utf8 = [](char32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  };
  json vocab = json::object();
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    vocab[utf8(printable ? static_cast<char32_t>(b) : next++)] = b;
  }
  json added = json::array();
  int id = 256;
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"})
    added.push_back({{"id", id++}, {"content", t}, {"special", std::string(t).find('|') != std::string::npos}});
  return json{{"version", "1.0"},
              {"added_tokens", added},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}}
      .dump();
}

const ninfer::tools::LoadedModel& model() {
  static const ninfer::tools::LoadedModel m = [] {
    namespace fz = ninfer::fuzz;
    spdlog::set_level(spdlog::level::warn);
    const std::string tok = tokenizer_json();
    fz::write_file(fz::scratch_dir() / "tokenizer.json", tok.data(), tok.size());
    const std::string manifest = "checkpoint: " + (fz::source_dir() / "tests/fixtures/tiny-qwen3").string() +
                                 "\ntokenizer: tokenizer.json\n";
    fz::write_file(fz::scratch_dir() / "m.yaml", manifest.data(), manifest.size());
    ninfer::tools::ServeOptions o;
    o.manifest = (fz::scratch_dir() / "m.yaml").string();
    o.max_concurrency = 1;
    return ninfer::tools::load_model(o);
  }();
  return m;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ninfer::tools;
  if (size == 0) return 0;
  const Endpoint ep = data[0] % 2 == 0 ? Endpoint::Chat : Endpoint::Completions;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    parse_request(ep, body, model());
  } catch (const ApiError&) {
  } catch (const std::exception& e) {
    ninfer::fuzz::unexpected("openai_request (the server would answer 500)", e);
  }
  return 0;
}
