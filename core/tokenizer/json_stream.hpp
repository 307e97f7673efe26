// Parsing tokenizer.json quickly. Qwen's file holds 151k vocabulary entries and 151k merges;
// as a JSON document tree those are ~450k small allocations and most of the load time. This
// parser builds the tree for everything else but streams model.vocab and model.merges straight
// into the spec.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer_file.hpp"

namespace ninfer::tokenizer_detail {

struct ParsedTokenizerFile {
  nlohmann::json root;         // the document, less what was streamed
  bool vocab_streamed = false;   // model.vocab went into spec.vocab (it was an object)
  bool merges_streamed = false;  // model.merges went into spec.merges (it was an array)
};

// Throws ninfer::Error naming `file` for malformed JSON and for vocabulary or merge entries of
// the wrong type.
ParsedTokenizerFile parse_tokenizer_json(const std::string& text, const std::string& file, TokenizerSpec& spec);

} // namespace ninfer::tokenizer_detail
