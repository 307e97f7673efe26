#include "json_stream.hpp"

#include <fmt/format.h>

#include <vector>

#include "ninfer/support/error.hpp"

namespace ninfer::tokenizer_detail {

namespace {

using nlohmann::json;

class StreamingHandler : public nlohmann::json_sax<json> {
 public:
  StreamingHandler(ParsedTokenizerFile& out, TokenizerSpec& spec, const std::string& file)
      : out_(out), spec_(spec), file_(file) {}

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool b) override { return value(json(b)); }
  bool number_integer(number_integer_t v) override { return mode_ == Mode::vocab ? vocab_id(v) : value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    return mode_ == Mode::vocab ? vocab_id(v > static_cast<number_unsigned_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v))
                                : value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool binary(binary_t&) override { return value(json()); }

  bool string(string_t& s) override {
    if (mode_ == Mode::merges) return merge_string(s);
    if (mode_ == Mode::merge_pair) {
      pair_.push_back(std::move(s));
      return true;
    }
    return value(json(std::move(s)));
  }

  bool start_object(std::size_t) override {
    deeper();
    if (mode_ == Mode::dom && at_model_key("vocab")) {
      mode_ = Mode::vocab;
      out_.vocab_streamed = true;
      return true;
    }
    if (mode_ != Mode::dom) return wrong_type("an object");
    return open(json::object());
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    --depth_;
    if (mode_ == Mode::vocab) {
      mode_ = Mode::dom;
      return true;
    }
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    deeper();
    if (mode_ == Mode::dom && at_model_key("merges")) {
      mode_ = Mode::merges;
      out_.merges_streamed = true;
      return true;
    }
    if (mode_ == Mode::merges) {
      mode_ = Mode::merge_pair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::dom) return wrong_type("an array");
    return open(json::array());
  }
  bool end_array() override {
    --depth_;
    if (mode_ == Mode::merge_pair) {
      if (pair_.size() != 2)
        throw Error(fmt::format("{}: model.merges[{}]: expected [left, right], found {} strings", file_,
                                spec_.merges.size(), pair_.size()));
      spec_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::merges;
      return true;
    }
    if (mode_ == Mode::merges) {
      mode_ = Mode::dom;
      return true;
    }
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw Error(fmt::format("tokenizer file {} is not valid JSON: {}", file_, e.what()));
  }

 private:
  enum class Mode { dom, vocab, merges, merge_pair };

  // The document tree is walked recursively later (and freed, printed, compared), so its
  // depth is bounded while it is read.
  void deeper() {
    if (++depth_ > kMaxTokenizerJsonDepth)
      throw Error(fmt::format("{}: nested deeper than {} levels; not a tokenizer.json", file_, kMaxTokenizerJsonDepth));
  }
  // The last key, cut for messages (vocabulary keys are tokens and can be long).
  std::string shown_key() const { return key_.size() <= 60 ? key_ : key_.substr(0, 60) + "..."; }

  // Whether the value about to start is root.model.<name>.
  bool at_model_key(const char* name) const {
    return stack_.size() == 2 && keys_[1] == "model" && stack_[1]->is_object() && key_ == name;
  }

  // Where the next value goes: the root, the end of the open array, or key_ of the open object.
  json* place(json v) {
    if (stack_.empty()) {
      out_.root = std::move(v);
      return &out_.root;
    }
    json& parent = *stack_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }
  bool open(json v) {
    const std::string key = stack_.empty() ? std::string() : key_;
    stack_.push_back(place(std::move(v)));
    keys_.push_back(key);
    return true;
  }
  bool value(json v) {
    if (mode_ == Mode::vocab) return vocab_id(-1);
    if (mode_ == Mode::merges || mode_ == Mode::merge_pair) return wrong_type(v.type_name());
    place(std::move(v));
    return true;
  }

  bool vocab_id(int64_t id) {
    if (id < 0)
      throw Error(fmt::format("{}: model.vocab.{}: expected a token id (a non-negative integer)", file_, shown_key()));
    if (id >= kTokenIdLimit)
      throw Error(fmt::format("{}: model.vocab.{}: token id {} is not below the limit of {}", file_, shown_key(), id,
                              kTokenIdLimit));
    spec_.vocab.emplace(std::move(key_), static_cast<int32_t>(id));
    return true;
  }
  bool merge_string(const std::string& s) {
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
      throw Error(fmt::format("{}: model.merges[{}]: '{}' is not of the form \"left right\"", file_,
                              spec_.merges.size(), s.size() <= 60 ? s : s.substr(0, 60) + "..."));
    spec_.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    return true;
  }
  bool wrong_type(const char* found) {
    if (mode_ == Mode::vocab)
      throw Error(fmt::format("{}: model.vocab.{}: expected a token id, found {}", file_, shown_key(), found));
    throw Error(fmt::format("{}: model.merges[{}]: expected \"left right\" or [left, right], found {}", file_,
                            spec_.merges.size(), found));
  }

  ParsedTokenizerFile& out_;
  TokenizerSpec& spec_;
  const std::string& file_;
  Mode mode_ = Mode::dom;
  std::vector<json*> stack_;        // open objects and arrays of the document tree
  std::vector<std::string> keys_;   // the key each of them sits under in its parent
  std::string key_;                 // the last object key read
  std::vector<std::string> pair_;   // the strings of a [left, right] merge being read
  int depth_ = 0;                   // open arrays and objects
};

} // namespace

ParsedTokenizerFile parse_tokenizer_json(const std::string& text, const std::string& file, TokenizerSpec& spec) {
  ParsedTokenizerFile out;
  StreamingHandler handler(out, spec, file);
  json::sax_parse(text, &handler);
  return out;
}

} // namespace ninfer::tokenizer_detail
