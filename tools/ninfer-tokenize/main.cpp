// ninfer-tokenize: text -> token ids and ids -> text with a Hugging Face tokenizer.json, exactly
// as the engine tokenises prompts (special tokens in the text recognised, nothing added).
//
//   ninfer-tokenize --tokenizer PATH --text "Hello world"      -> {"ids": [9707, 1879]}
//   ninfer-tokenize --tokenizer PATH --decode 9707,1879        -> Hello world
#include <CLI/CLI.hpp>

#include "tool_cli.hpp"
#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "ninfer/support/error.hpp"
#include "ninfer/support/log.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"

namespace {

using namespace ninfer;

struct Options {
  std::string tokenizer;
  std::string text;
  bool text_from_stdin = false;
  std::string decode;
  bool chat = false;
  bool no_think = false;
  bool json = false;
  bool skip_special = false;
};

// "1,2, 3" -> {1, 2, 3}; anything else is an error naming the bad item.
std::vector<int32_t> parse_ids(const std::string& list) {
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    std::string item = list.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    int32_t id = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size())
      throw Error(fmt::format("--decode: '{}' is not a token id; expected comma-separated integers like 9707,1879",
                              item));
    ids.push_back(id);
    start = comma + 1;
  }
  return ids;
}

int run(const Options& o) {
  const Tokenizer tokenizer = Tokenizer::load(o.tokenizer);
  if (!o.decode.empty()) {
    const std::string text = tokenizer.decode(parse_ids(o.decode), {.skip_special_tokens = o.skip_special});
    if (o.json)
      std::cout << nlohmann::json{{"text", text}}.dump() << "\n";
    else
      std::cout << text << "\n";
    return 0;
  }
  std::string text = o.text;
  if (o.text_from_stdin) text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (o.chat) text = format_chat({{"user", text, std::nullopt}}, {.enable_thinking = !o.no_think});
  // Invalid UTF-8 would make the JSON dump throw; encode() reports it first with the offset.
  const std::vector<int32_t> ids = tokenizer.encode(text);
  nlohmann::json out{{"ids", ids}};
  if (o.chat) out["text"] = text;
  std::cout << out.dump() << "\n";
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "ninfer-tokenize: encode text to token ids, or decode ids to text, with a Hugging Face tokenizer.json.\n"
      "Special tokens written in the text (<|im_start|>, <think>, ...) are recognised; nothing is added.",
      "ninfer-tokenize"};
  Options o;
  app.add_option("--tokenizer", o.tokenizer, "tokenizer.json, or a folder holding one")->required();
  auto* text = app.add_option("--text", o.text, "text to encode; prints {\"ids\": [...]}");
  auto* stdin_flag = app.add_flag("--stdin", o.text_from_stdin, "encode the text read from standard input");
  auto* decode = app.add_option("--decode", o.decode, "comma-separated ids to decode, e.g. 9707,1879; prints the text");
  app.add_flag("--chat", o.chat, "wrap the text as one user turn of a Qwen chat prompt first (prints it as \"text\")");
  app.add_flag("--no-think", o.no_think, "with --chat: turn Qwen3's thinking off (empty <think> block)");
  app.add_flag("--json", o.json, "with --decode: print {\"text\": ...} (exact, escaped) instead of the text");
  app.add_flag("--skip-special", o.skip_special, "with --decode: leave out special tokens such as <|im_end|>");
  text->excludes(decode)->excludes(stdin_flag);
  stdin_flag->excludes(decode);
  ninfer::tools::add_version_flag(app, "ninfer-tokenize");
  if (auto rc = ninfer::tools::parse_command_line(app, argc, argv, "ninfer-tokenize")) return *rc;
  init_logging(false);
  return ninfer::tools::run_tool("ninfer-tokenize", [&] {
    if (o.decode.empty() && !text->count() && !o.text_from_stdin)
      throw ninfer::tools::UsageError("one of --text, --stdin or --decode is required");
    return run(o);
  });
}
