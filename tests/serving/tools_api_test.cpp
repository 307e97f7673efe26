// Tool calling on /v1/chat/completions and the Anthropic Messages API, against the real
// ninfer-serve process on the random-weight demo checkpoint (real Qwen3 tokenizer). Such a
// model never writes a call of its own accord, so calls come from a named tool_choice, whose
// prefill makes whatever the model writes next the call's arguments; the parser itself is
// tested on written calls in tool_calls_test.cpp, and the prompts in chat_template_test.cpp.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

#include "demo_checkpoint.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "process.hpp"
#include "serve_client.hpp"
#include "server_process.hpp"
#include "temp_dir.hpp"

using namespace ninfer;
using namespace ninfer::test;
using nlohmann::json;

namespace {

std::vector<std::string> demo_args(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a{"--checkpoint", demo_checkpoint(NINFER_MAKE_CHECKPOINT_BIN).string(), "--device", "cpu",
                             "--max-concurrency", "2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

const json kWeatherTool = json::parse(R"({"type": "function", "function": {"name": "get_weather",
  "description": "Weather now", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})");

json named_call_request(bool stream) {
  json r{{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
         {"max_tokens", 10},
         {"temperature", 0},
         {"ignore_eos", true},
         {"tools", {kWeatherTool}},
         {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
         {"return_token_ids", true}};
  if (stream) r["stream"] = true;
  return r;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Anthropic's SSE events: (event name, data) in order.
std::vector<std::pair<std::string, json>> anthropic_events(const std::string& stream) {
  std::vector<std::pair<std::string, json>> out;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t end = stream.find("\n\n", pos);
    const std::string e = stream.substr(pos, end - pos);
    const size_t nl = e.find('\n');
    if (e.starts_with("event: ") && nl != std::string::npos && e.compare(nl + 1, 6, "data: ") == 0)
      out.emplace_back(e.substr(7, nl - 7), json::parse(e.substr(nl + 7)));
    else
      out.emplace_back("?", json(e));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

} // namespace

// A named tool_choice returns that call whatever the model writes: its arguments are the
// model's text (after the prefill's `"arguments":`), streamed as OpenAI streams them, and the
// deltas join to the non-streamed call.
TEST(NinferServe, NamedToolChoiceReturnsTheCallAndStreamsItAsOpenAIDoes) {
  const Tokenizer tok = Tokenizer::load(real_tokenizer());
  ServerProcess server(demo_args());
  auto c = server.client();
  const Reply whole = post(*c, "/v1/chat/completions", named_call_request(false));
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const json& choice = whole.body["choices"][0];
  const json& message = choice["message"];
  EXPECT_TRUE(message["content"].is_null()) << message.dump();
  ASSERT_EQ(message["tool_calls"].size(), 1u) << message.dump();
  const json& call = message["tool_calls"][0];
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(choice["finish_reason"], "length"); // ignore_eos: cut by max_tokens, not ended of itself
  // The arguments are the generated text less its leading whitespace (and, if it is not an
  // object, less a trailing `}` that would close the call).
  std::string text = tok.decode(choice["token_ids"].get<std::vector<int32_t>>());
  while (!text.empty() && is_space(text.front())) text.erase(0, 1);
  const std::string args = call["function"]["arguments"];
  if (!text.starts_with("{")) {
    while (!text.empty() && is_space(text.back())) text.pop_back();
    if (text.ends_with("}")) text.pop_back();
    while (!text.empty() && is_space(text.back())) text.pop_back();
  }
  EXPECT_EQ(args, text);

  const auto [status, stream] = post_stream(*c, "/v1/chat/completions", named_call_request(true));
  ASSERT_EQ(status, 200);
  std::string streamed_args, finish;
  int starts = 0;
  for (const std::string& e : sse_data(stream)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    for (const json& ch : chunk["choices"]) {
      if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
      const json& delta = ch["delta"];
      if (delta.contains("content")) EXPECT_EQ(delta["content"], "") << "no text beside a forced call";
      if (!delta.contains("tool_calls")) continue;
      const json& tc = delta["tool_calls"][0];
      EXPECT_EQ(tc["index"], 0);
      if (tc.contains("id")) {
        // The first delta of a call: its id, type and name, then only arguments follow.
        ++starts;
        EXPECT_EQ(streamed_args, "");
        EXPECT_TRUE(tc["id"].get<std::string>().starts_with("call_"));
        EXPECT_EQ(tc["type"], "function");
        EXPECT_EQ(tc["function"]["name"], "get_weather");
      }
      streamed_args += tc["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(starts, 1);
  EXPECT_EQ(streamed_args, args);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// tool_choice "required" prefills a call's opening, and the model picks the function; the
// random model names none, so the prefill and its text come back as content, the same whole and
// streamed (the deltas join to the whole reply's content and calls).
TEST(NinferServe, RequiredToolChoiceStreamsWhatTheWholeReplySays) {
  ServerProcess server(demo_args());
  auto c = server.client();
  json req = named_call_request(false);
  req["tool_choice"] = "required";
  req.erase("return_token_ids");
  const Reply whole = post(*c, "/v1/chat/completions", req);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  const json& message = whole.body["choices"][0]["message"];
  const std::string content = message["content"].is_string() ? message["content"].get<std::string>() : "";
  const size_t calls = message.contains("tool_calls") ? message["tool_calls"].size() : 0;
  if (calls == 0) EXPECT_TRUE(content.starts_with("<tool_call>")) << "the prefill is part of an answer that is no call";
  req["stream"] = true;
  const auto [status, stream] = post_stream(*c, "/v1/chat/completions", req);
  ASSERT_EQ(status, 200);
  std::string streamed;
  size_t streamed_calls = 0;
  for (const std::string& e : sse_data(stream)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    for (const json& ch : chunk["choices"]) {
      const json& delta = ch["delta"];
      if (delta.contains("content") && delta["content"].is_string()) streamed += delta["content"].get<std::string>();
      if (delta.contains("tool_calls") && delta["tool_calls"][0].contains("id")) ++streamed_calls;
    }
  }
  EXPECT_EQ(streamed, content) << stream;
  EXPECT_EQ(streamed_calls, calls);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, ToolFieldsAreCheckedAndNoneOrAutoLeaveTextAlone) {
  ServerProcess server(demo_args());
  auto c = server.client();
  auto with = [](json r, const char* key, json v) {
    r[key] = v;
    return r;
  };
  const json base = named_call_request(false);
  struct Bad {
    json request;
    std::string param;
  };
  const std::vector<Bad> bad = {
      {with(base, "tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}), "tool_choice.function.name"},
      {with(with(base, "tools", json::array()), "tool_choice", "required"), "tool_choice"},
      {with(base, "tool_choice", "sometimes"), "tool_choice"},
      {with(base, "tools", {{{"type", "retrieval"}}}), "tools[0].type"},
      {with(base, "tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}), "tools[0].function.name"},
      {with(base, "tools", {kWeatherTool, kWeatherTool}), "tools[1].function.name"},
      {with(base, "messages", {{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {{{"function", {{"name", "f"}}}}}}}}),
       "messages[0].tool_calls[0].function.arguments"},
  };
  for (const Bad& b : bad) {
    const Reply r = post(*c, "/v1/chat/completions", b.request);
    EXPECT_EQ(r.status, 400) << b.request.dump();
    EXPECT_EQ(r.body["error"]["param"], b.param) << r.body.dump();
  }
  // none and auto: the random model writes no call, so the reply is its text, as without tools.
  for (const char* choice : {"none", "auto"}) {
    json req = with(base, "tool_choice", choice);
    req.erase("return_token_ids");
    const Reply r = post(*c, "/v1/chat/completions", req);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    EXPECT_FALSE(r.body["choices"][0]["message"].contains("tool_calls")) << r.body.dump();
    EXPECT_TRUE(r.body["choices"][0]["message"]["content"].is_string());
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// /v1/messages whole and streamed: the documented event order, deltas that join to the whole
// reply, stop reasons, usage equal to count_tokens, and a forced call the model botched sent
// back as text.
TEST(NinferServe, AnthropicMessagesWholeStreamedAndCounted) {
  ServerProcess server(demo_args());
  auto c = server.client();
  const httplib::Headers headers{{"anthropic-version", "2023-06-01"}};
  json req{{"max_tokens", 8},
           {"temperature", 0},
           {"system", "Be brief."},
           {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Name a colour."}}}}}}}};
  const Reply whole = post(*c, "/v1/messages", req, headers);
  ASSERT_EQ(whole.status, 200) << whole.body.dump();
  EXPECT_EQ(whole.body["type"], "message");
  EXPECT_EQ(whole.body["role"], "assistant");
  EXPECT_TRUE(whole.body["id"].get<std::string>().starts_with("msg_"));
  const std::string stop = whole.body["stop_reason"];
  EXPECT_TRUE(stop == "max_tokens" || stop == "end_turn") << stop;
  std::string text;
  for (const json& b : whole.body["content"]) {
    EXPECT_EQ(b["type"], "text");
    text += b["text"].get<std::string>();
  }
  const Reply count = post(*c, "/v1/messages/count_tokens", req, headers);
  ASSERT_EQ(count.status, 200) << count.body.dump();
  EXPECT_EQ(count.body, json({{"input_tokens", whole.body["usage"]["input_tokens"]}}));

  json sreq = req;
  sreq["stream"] = true;
  const auto [status, stream] = post_stream(*c, "/v1/messages", sreq);
  ASSERT_EQ(status, 200);
  const auto events = anthropic_events(stream);
  ASSERT_GE(events.size(), 3u) << stream;
  std::vector<std::string> names;
  std::string streamed;
  for (const auto& [name, data] : events) {
    EXPECT_EQ(name, data["type"]) << "each event's name is its data's type";
    names.push_back(name);
    if (name == "content_block_delta") streamed += data["delta"]["text"].get<std::string>();
  }
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(events.front().second["message"]["usage"]["input_tokens"], whole.body["usage"]["input_tokens"]);
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  // Between them, blocks: start, deltas, stop, each with its index.
  for (size_t i = 1; i + 2 < names.size();) {
    ASSERT_EQ(names[i], "content_block_start") << stream;
    const json index = events[i].second["index"];
    for (++i; names[i] == "content_block_delta"; ++i) EXPECT_EQ(events[i].second["index"], index);
    ASSERT_EQ(names[i], "content_block_stop");
    EXPECT_EQ(events[i++].second["index"], index);
  }
  EXPECT_EQ(streamed, text);
  const json& delta = events[events.size() - 2].second;
  EXPECT_EQ(delta["delta"]["stop_reason"], stop);
  EXPECT_EQ(delta["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);

  // A stop sequence (the reply's last character) ends it there and is named.
  if (!text.empty()) {
    size_t last = text.size() - 1;
    while (last > 0 && (static_cast<unsigned char>(text[last]) & 0xC0) == 0x80) --last;
    json cut_req = req;
    cut_req["stop_sequences"] = {"\x01never", text.substr(last)};
    const Reply cut = post(*c, "/v1/messages", cut_req, headers);
    ASSERT_EQ(cut.status, 200) << cut.body.dump();
    EXPECT_EQ(cut.body["stop_reason"], "stop_sequence");
    EXPECT_EQ(cut.body["stop_sequence"], text.substr(last));
  }

  // A named tool the random model does not call well: its text, never an error.
  json tool_req = req;
  tool_req["tools"] = {{{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}}};
  tool_req["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  const Reply tool = post(*c, "/v1/messages", tool_req, headers);
  ASSERT_EQ(tool.status, 200) << tool.body.dump();
  for (const json& b : tool.body["content"]) {
    if (b["type"] == "tool_use") {
      EXPECT_TRUE(b["input"].is_object());
      EXPECT_EQ(tool.body["stop_reason"], "tool_use");
    } else {
      EXPECT_TRUE(b["text"].get<std::string>().starts_with("<tool_call>\n{\"name\": \"get_weather\", \"arguments\":"));
    }
  }
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(NinferServe, AnthropicErrorsHaveAnthropicsShapeAndOpenAIRoutesKeepTheirs) {
  ServerProcess server(demo_args({"--api-key", "sesame", "--max-context", "64", "--max-body-bytes", "4096"}));
  auto c = server.client();
  const httplib::Headers key{{"x-api-key", "sesame"}, {"anthropic-version", "2023-06-01"}};
  const json ok_messages = {{{"role", "user"}, {"content", "Hi"}}};
  auto expect_error = [&](const Reply& r, int status, const std::string& type, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body.dump();
    EXPECT_EQ(r.body["type"], "error") << what;
    EXPECT_EQ(r.body["error"]["type"], type) << what;
    EXPECT_TRUE(r.body["error"]["message"].is_string()) << what;
  };
  expect_error(post(*c, "/v1/messages", {{"messages", ok_messages}}, key), 400, "invalid_request_error", "no max_tokens");
  expect_error(post(*c, "/v1/messages", {{"max_tokens", 4}, {"messages", ok_messages}, {"model", "other"}}, key), 404,
               "not_found_error", "unknown model");
  expect_error(post(*c, "/v1/messages", {{"max_tokens", 4}, {"messages", ok_messages}, {"temperature", 1.5}}, key), 400,
               "invalid_request_error", "temperature above 1");
  expect_error(post(*c, "/v1/messages",
                    {{"max_tokens", 4}, {"messages", {ok_messages[0], {{"role", "assistant"}, {"content", "Well"}}}}}, key),
               400, "invalid_request_error", "a final assistant message");
  expect_error(post(*c, "/v1/messages",
                    {{"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", {{{"type", "image"}}}}}}}}, key),
               400, "invalid_request_error", "an image block");
  expect_error(post(*c, "/v1/messages",
                    {{"max_tokens", 4}, {"messages", ok_messages}, {"tool_choice", {{"type", "tool"}, {"name", "f"}}}}, key),
               400, "invalid_request_error", "a tool_choice naming no tool");
  // A prompt longer than the context: Anthropic answers 400, not 413.
  expect_error(post(*c, "/v1/messages", {{"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", std::string(400, 'a') + " b c d e f g h i j k l m n o p q r s t u v w x y z"}}}}}, key),
               400, "invalid_request_error", "a prompt over the context");
  expect_error(post(*c, "/v1/messages", {{"max_tokens", 4}, {"messages", ok_messages}}, {{"x-api-key", "sesam"}}), 401,
               "authentication_error", "a wrong key");
  expect_error(post(*c, "/v1/messages/batches", json::object(), key), 404, "not_found_error", "an unknown route");
  {
    auto r = c->Post("/v1/messages", key, "{not json", "application/json");
    ASSERT_TRUE(r);
    expect_error({r->status, json::parse(r->body)}, 400, "invalid_request_error", "malformed JSON");
  }
  // The HTTP layer's own refusals follow the route too.
  const json huge{{"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", std::string(8000, 'x')}}}}};
  expect_error(post(*c, "/v1/messages", huge, key), 413, "request_too_large", "a body over --max-body-bytes");
  const Reply huge_openai = post(*c, "/v1/chat/completions", huge, key);
  EXPECT_EQ(huge_openai.status, 413);
  EXPECT_TRUE(huge_openai.body["error"].is_object()) << huge_openai.body.dump();
  EXPECT_FALSE(huge_openai.body.contains("type"));
  // The same key as x-api-key on an OpenAI route; its errors stay OpenAI's.
  const Reply models = [&] {
    auto r = c->Get("/v1/models", key);
    return Reply{r ? r->status : -1, r ? json::parse(r->body) : json()};
  }();
  EXPECT_EQ(models.status, 200);
  const Reply openai = post(*c, "/v1/chat/completions", {{"messages", ok_messages}, {"temperature", 5}}, key);
  EXPECT_EQ(openai.status, 400);
  EXPECT_EQ(openai.body["error"]["param"], "temperature");
  EXPECT_FALSE(openai.body.contains("type"));
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Anthropic's usage splits the prompt into the tokens computed (input_tokens) and those read from
// the slot (cache_read_input_tokens): a next turn on a dense model (whose slot keeps any common
// prefix) reads the first turn's shared tokens; the two always add up to count_tokens, streamed
// or not; with --no-prefix-cache nothing is read.
TEST(NinferServe, AnthropicUsageCountsTheTokensReadFromTheSlot) {
  const TempDir dir;
  const auto dense = dir / "dense";
  const ProcessOutput made = run_process(std::string(NINFER_MAKE_CHECKPOINT_BIN) +
                                         " --preset qwen3-cpu-small --seed 7 --tokenizer " +
                                         shell_quote(real_tokenizer().string()) + " --out " + shell_quote(dense.string()));
  ASSERT_EQ(made.status, 0) << made.err;
  const httplib::Headers headers{{"anthropic-version", "2023-06-01"}};
  const json first_turn{{"role", "user"}, {"content", "Name a colour."}};
  const json first{{"max_tokens", 4}, {"temperature", 0}, {"messages", {first_turn}}};
  for (bool reuse : {true, false}) {
    std::vector<std::string> args{"--checkpoint", dense.string(), "--device", "cpu", "--max-concurrency", "1"};
    if (!reuse) args.push_back("--no-prefix-cache");
    ServerProcess server(args);
    auto c = server.client();
    const Reply a = post(*c, "/v1/messages", first, headers);
    ASSERT_EQ(a.status, 200) << a.body.dump();
    EXPECT_EQ(a.body["usage"]["cache_read_input_tokens"], 0);
    EXPECT_EQ(a.body["usage"]["cache_creation_input_tokens"], 0);
    std::string text;
    for (const json& b : a.body["content"]) text += b["text"].get<std::string>();
    json second = first;
    second["messages"] = {first_turn, {{"role", "assistant"}, {"content", text.empty() ? "Red." : text}},
                          {{"role", "user"}, {"content", "And another?"}}};
    const Reply count = post(*c, "/v1/messages/count_tokens", second, headers);
    ASSERT_EQ(count.status, 200) << count.body.dump();
    const int64_t prompt = count.body["input_tokens"];
    const Reply b = post(*c, "/v1/messages", second, headers);
    ASSERT_EQ(b.status, 200) << b.body.dump();
    const json& u = b.body["usage"];
    const int64_t read = u["cache_read_input_tokens"];
    EXPECT_EQ(u["input_tokens"].get<int64_t>() + read, prompt) << u;
    if (reuse) {
      // At least "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n": the first
      // prompt less its empty think block (4 tokens), which the next turn's history leaves out.
      EXPECT_GE(read, a.body["usage"]["input_tokens"].get<int64_t>() - 4) << u;
      EXPECT_LT(read, prompt) << u;
    } else {
      EXPECT_EQ(read, 0) << u;
    }
    json streamed = second;
    streamed["stream"] = true;
    const auto [status, stream] = post_stream(*c, "/v1/messages", streamed);
    ASSERT_EQ(status, 200);
    const auto events = anthropic_events(stream);
    ASSERT_GE(events.size(), 3u) << stream;
    EXPECT_EQ(events.front().second["message"]["usage"]["input_tokens"], prompt);
    const json& du = events[events.size() - 2].second["usage"];
    EXPECT_EQ(du["input_tokens"].get<int64_t>() + du["cache_read_input_tokens"].get<int64_t>(), prompt) << du;
    if (!reuse) EXPECT_EQ(du["cache_read_input_tokens"], 0) << du;
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}
