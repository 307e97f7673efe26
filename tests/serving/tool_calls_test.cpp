// The reply side of tool calling, on strings: ToolCallParser (calls read out of an answer,
// whole and in random pieces), Anthropic's content blocks built from it, and the JSON the
// chat template's tojson writes. Expected values are written out by hand from the call
// format the Qwen3 template asks for and from Python's json.dumps rules.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>

#include "anthropic_response.hpp"
#include "api_error.hpp"
#include "request_json.hpp"
#include "template_json.hpp"
#include "test_support.hpp"
#include "tool_calls.hpp"

using namespace ninfer::tools;
using nlohmann::json;

namespace {

ToolCallOptions weather_tools() { return ToolCallOptions{{"get_weather", "get_time"}, {}, false}; }

// The answer fed in random pieces (1 to 7 bytes), events joined as parse_tool_calls joins them.
ParsedAnswer parse_in_pieces(std::string_view text, const ToolCallOptions& o, std::mt19937& rng) {
  ToolCallParser parser(o);
  std::vector<ToolCallEvent> events;
  std::uniform_int_distribution<size_t> len(1, 7);
  for (size_t at = 0; at < text.size();) {
    const size_t n = std::min(len(rng), text.size() - at);
    for (auto& e : parser.push(text.substr(at, n))) events.push_back(std::move(e));
    at += n;
  }
  for (auto& e : parser.finish()) events.push_back(std::move(e));
  ParsedAnswer out;
  for (const ToolCallEvent& e : events) {
    if (e.kind == ToolCallEvent::Kind::Content) out.content += e.text;
    if (e.kind == ToolCallEvent::Kind::CallStart) out.calls.push_back({e.text, {}, {}});
    if (e.kind == ToolCallEvent::Kind::Arguments) out.calls.at(e.call).arguments += e.text;
    if (e.kind == ToolCallEvent::Kind::CallEnd) out.calls.at(e.call).raw = e.text;
  }
  return out;
}

void expect_same(const ParsedAnswer& a, const ParsedAnswer& b) {
  EXPECT_EQ(a.content, b.content);
  ASSERT_EQ(a.calls.size(), b.calls.size());
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].name, b.calls[i].name);
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments);
    EXPECT_EQ(a.calls[i].raw, b.calls[i].raw);
  }
}

} // namespace

TEST(ToolCallParser, OneWellFormedCallAsTheTemplateWritesIt) {
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const ParsedAnswer a = parse_tool_calls(text, weather_tools());
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(a.calls[0].raw, text);
}

TEST(ToolCallParser, SeveralCallsWithTextBeforeAndNestedArguments) {
  const std::string text =
      "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris \\\"x\\\"\", "
      "\"opts\": {\"units\": [\"C\", {\"a\": []}]}}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}"
      "\n</tool_call>";
  const ParsedAnswer a = parse_tool_calls(text, weather_tools());
  EXPECT_EQ(a.content, "Let me check both.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].arguments, "{\"city\": \"Pa}ris \\\"x\\\"\", \"opts\": {\"units\": [\"C\", {\"a\": []}]}}");
  EXPECT_EQ(a.calls[1].name, "get_time");
  EXPECT_EQ(a.calls[1].arguments, "{}");
  EXPECT_NO_THROW((void)json::parse(a.calls[0].arguments));
}

TEST(ToolCallParser, MalformedBlocksStayTextAsWritten) {
  for (const std::string text : {
           std::string("<tool_call>\nnot json at all\n</tool_call>"),
           std::string("<tool_call>\n{\"name\": 5, \"arguments\": {}}\n</tool_call>"),
           std::string("<tool_call>\n{\"name\": \"delete_all\", \"arguments\": {}}\n</tool_call>"), // undeclared
           std::string("<tool_call>\n{\"arguments\": {}, \"name\": \"get_weather\"}\n</tool_call>"), // name not first
           std::string("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"Paris\"}\n</tool_call>"),
           std::string("Sure <tool_call>\n{\"name\": \"get_wea"), // cut inside the header
       }) {
    const ParsedAnswer a = parse_tool_calls(text, weather_tools());
    EXPECT_TRUE(a.calls.empty()) << text;
    EXPECT_EQ(a.content, text);
  }
  // A malformed block, then a good one: the first is text, the second a call.
  const std::string bad = "<tool_call>\nnope\n</tool_call>";
  const ParsedAnswer a =
      parse_tool_calls(bad + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", weather_tools());
  EXPECT_EQ(a.content, bad);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_time");
}

TEST(ToolCallParser, TextWithoutCallsIsUntouched) {
  const std::string text = "  A < B and <tool or <tool_cal are not tags.\n\n";
  EXPECT_EQ(parse_tool_calls(text, weather_tools()).content, text);
  std::mt19937 rng(3);
  EXPECT_EQ(parse_in_pieces(text, weather_tools(), rng).content, text);
}

TEST(ToolCallParser, ACutCallKeepsItsUnfinishedArguments) {
  const ParsedAnswer a = parse_tool_calls("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa", weather_tools());
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].arguments, "{\"city\": \"Pa");
  // A close tag outside a string ends the arguments too.
  const ParsedAnswer b = parse_tool_calls("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\": 1</tool_call>ok", weather_tools());
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].arguments, "{\"a\": 1");
  EXPECT_EQ(b.content, "ok");
}

TEST(ToolCallParser, APrefilledForcedCallTakesWhateverTheModelWrites) {
  ToolCallOptions o{{"get_weather"}, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":", true};
  const ParsedAnswer good = parse_tool_calls(" {\"city\": \"Oslo\"}}\n</tool_call>", o);
  ASSERT_EQ(good.calls.size(), 1u);
  EXPECT_EQ(good.calls[0].arguments, "{\"city\": \"Oslo\"}");
  EXPECT_EQ(good.calls[0].raw, o.prefix + " {\"city\": \"Oslo\"}}\n</tool_call>");
  // Not an object: still the call, its arguments the text less the call's closing brace.
  const ParsedAnswer odd = parse_tool_calls(" Oslo please }\n</tool_call>", o);
  ASSERT_EQ(odd.calls.size(), 1u);
  EXPECT_EQ(odd.calls[0].arguments, "Oslo please");
  const ParsedAnswer none = parse_tool_calls("", o);
  ASSERT_EQ(none.calls.size(), 1u);
  EXPECT_EQ(none.calls[0].arguments, "");
}

TEST(ToolCallParser, PiecesOfAnySizeGiveTheWholeTextsResult) {
  const std::vector<std::string> texts = {
      "Thinking aloud.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"S\\u00e3o \\\"P\\\"\"}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": [1, {\"x\": \"]}\"}]}}\n</tool_call>\n",
      "<tool_call>\nbroken</tool_call> then <tool_call>{\"name\": \"get_time\", \"arguments\": {}} </tool_call> done <to",
      "é<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"a\": \"</tool_call>\"}}}} trailing",
  };
  std::mt19937 rng(11);
  for (const std::string& t : texts)
    for (int round = 0; round < 50; ++round) expect_same(parse_in_pieces(t, weather_tools(), rng), parse_tool_calls(t, weather_tools()));
  ToolCallOptions forced{{"get_weather"}, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":", true};
  for (const std::string t : {std::string(" raw words } </tool_call> after"), std::string(" {\"k\": \"}\"}} \n")})
    for (int round = 0; round < 50; ++round) expect_same(parse_in_pieces(t, forced, rng), parse_tool_calls(t, forced));
}

TEST(AnthropicBlocks, ThinkingTextAndAToolUseInOrder) {
  MessageBlocks blocks(weather_tools());
  std::vector<json> events;
  auto add = [&](std::vector<json> e) { events.insert(events.end(), e.begin(), e.end()); };
  add(blocks.push("Let me think.", true));
  add(blocks.push("I will look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": ", false));
  add(blocks.push("\"Paris\"}}\n</tool_call>", false));
  add(blocks.finish());
  const json expected_content = json::parse(R"([
    {"type": "thinking", "thinking": "Let me think.", "signature": ""},
    {"type": "text", "text": "I will look."},
    {"type": "tool_use", "name": "get_weather", "input": {"city": "Paris"}}])");
  json content = blocks.content();
  ASSERT_EQ(content.size(), 3u);
  EXPECT_TRUE(content[2]["id"].get<std::string>().starts_with("toolu_"));
  content[2].erase("id");
  EXPECT_EQ(content, expected_content);
  EXPECT_EQ(blocks.tool_uses(), 1u);
  std::vector<std::string> order;
  for (const json& e : events) order.push_back(e["type"].get<std::string>() + ":" + std::to_string(e["index"].get<int>()));
  const std::vector<std::string> expected_order = {
      "content_block_start:0", "content_block_delta:0", "content_block_stop:0", "content_block_start:1",
      "content_block_delta:1", "content_block_stop:1", "content_block_start:2", "content_block_delta:2",
      "content_block_stop:2"};
  EXPECT_EQ(order, expected_order);
  EXPECT_EQ(events[7]["delta"], json::parse(R"({"type": "input_json_delta", "partial_json": "{\"city\": \"Paris\"}"})"));
}

TEST(AnthropicBlocks, ACallWhoseArgumentsAreNotAnObjectIsText) {
  MessageBlocks blocks(weather_tools());
  const std::string raw = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris}}\n</tool_call>";
  blocks.push(raw, false);
  blocks.finish();
  EXPECT_EQ(blocks.content(), json::array({json{{"type", "text"}, {"text", raw}}}));
  EXPECT_EQ(blocks.tool_uses(), 0u);
}

TEST(AnthropicErrors, ShapeAndStatus) {
  const AnthropicError e = anthropic_error(bad_param("max_tokens", "required"));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.body, json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens: required"}})"));
  EXPECT_EQ(anthropic_error(ApiError(413, "too long", "invalid_request_error", "messages", "context_length_exceeded")).status, 400);
  EXPECT_EQ(anthropic_error(ApiError(429, "busy")).body["error"]["type"], "rate_limit_error");
  EXPECT_EQ(anthropic_error(ApiError(503, "stopping")).status, 529);
  EXPECT_EQ(anthropic_error(ApiError(401, "key")).body["error"]["type"], "authentication_error");
}

TEST(TemplateJson, WritesAsPythonsJsonDumps) {
  // json.dumps(x, ensure_ascii=False) of the same value, written out by hand.
  const RequestJson v = parse_request_body(
      R"({"b": 1, "a": [true, null, -2.5, "x\ny\"z\\"], "é": {"ctl": "\u0001\t", "e": {}, "l": []}})");
  EXPECT_EQ(template_json(v), "{\"b\": 1, \"a\": [true, null, -2.5, \"x\\ny\\\"z\\\\\"], \"é\": {\"ctl\": \"\\u0001\\t\", \"e\": {}, \"l\": []}}");
}

TEST(RequestJson, KeepsKeyOrderAndTheLastOfARepeatedKeyInItsFirstPlace) {
  const RequestJson v = parse_request_body(R"({"z": 1, "a": 2, "z": 3, "m": {"y": 0, "b": 1}})");
  EXPECT_EQ(template_json(v), R"({"z": 3, "a": 2, "m": {"y": 0, "b": 1}})");
  try {
    parse_request_body(R"({"tools": [{"x": 1}, {"y": [1, 1e999]}]})");
    FAIL() << "1e999 accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "tools[1].y[1]");
  }
  EXPECT_THROW(parse_request_body("{\"a\": "), ApiError);
}
