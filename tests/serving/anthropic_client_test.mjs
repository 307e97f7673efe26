// ninfer-serve's Anthropic Messages API driven by the official `@anthropic-ai/sdk` client
// (pinned in package.json): a random-weight Qwen3.5 checkpoint with the real Qwen3 tokenizer,
// served on loopback behind an API key (which the client sends as x-api-key).
//   node anthropic_client_test.mjs NINFER_SERVE NINFER_MAKE_CHECKPOINT TOKENIZER_JSON
// Token counts are checked against the chat template rendered by @huggingface/jinja and
// tokenized by @huggingface/tokenizers. Exits non-zero (with the failed assertion) when the
// server disagrees with what the client expects.
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";

const [serveBin, makeCheckpointBin, tokenizerPath] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), "ninfer-anthropic-"));
process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
const ckpt = join(dir, "demo");
execFileSync(makeCheckpointBin, ["--preset", "qwen3_5-cpu-small", "--seed", "5", "--tokenizer", tokenizerPath, "--out", ckpt],
             { stdio: "ignore" });

// The reference prompt length: the real template, rendered and tokenized by Hugging Face's
// JavaScript implementations.
const config = JSON.parse(readFileSync(join(dirname(tokenizerPath), "tokenizer_config.json"), "utf8"));
const template = new Template(config.chat_template);
const tokenizer = new Tokenizer(JSON.parse(readFileSync(tokenizerPath, "utf8")), config);
const templateTokens = (context) =>
  tokenizer.encode(template.render({ add_generation_prompt: true, ...context }), { add_special_tokens: false }).ids.length;

const server = spawn(serveBin, ["--checkpoint", ckpt, "--host", "127.0.0.1", "--port", "0", "--max-concurrency", "2",
                                "--api-key", "sesame"], { stdio: ["ignore", "ignore", "pipe"] });
let log = "";
const port = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error("ninfer-serve did not start:\n" + log)), 120000);
  server.stderr.on("data", (d) => {
    log += d;
    const m = log.match(/on http:\/\/127\.0\.0\.1:(\d+)/);
    if (m) { clearTimeout(timer); resolve(Number(m[1])); }
  });
  server.on("exit", (code) => reject(new Error(`ninfer-serve exited (${code}):\n${log}`)));
});

const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: "sesame", maxRetries: 0 });
try {
  const model = "demo";
  const ask = { model, max_tokens: 10, temperature: 0, system: "Be brief.",
                messages: [{ role: "user", content: "Name three colours." }] };
  const whole = await client.messages.create(ask);
  assert.equal(whole.type, "message");
  assert.equal(whole.role, "assistant");
  assert.ok(["end_turn", "max_tokens"].includes(whole.stop_reason));
  assert.ok(whole.content.every((b) => b.type === "text"));
  assert.ok(whole.usage.output_tokens <= 10 && whole.usage.output_tokens > 0);
  const wholeText = whole.content.map((b) => b.text).join("");
  // Thinking is off unless asked for: the template's empty think block is in the prompt.
  const messagesAsTemplate = [{ role: "system", content: "Be brief." }, { role: "user", content: "Name three colours." }];
  assert.equal(whole.usage.input_tokens, templateTokens({ messages: messagesAsTemplate, enable_thinking: false }));

  // Streaming with the client's helpers: text events join to the whole reply, and the final
  // message it accumulates equals the non-streamed one.
  const stream = client.messages.stream(ask);
  let streamed = "";
  stream.on("text", (t) => { streamed += t; });
  const final = await stream.finalMessage();
  assert.equal(streamed, wholeText);
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.deepEqual(final.usage.output_tokens, whole.usage.output_tokens);

  const counted = await client.messages.countTokens({ model, system: ask.system, messages: ask.messages });
  assert.equal(counted.input_tokens, whole.usage.input_tokens);

  // A tool round trip: the assistant's tool_use and the user's tool_result go back in; the
  // prompt is the template's rendering of the same conversation with its tools.
  const tools = [{ name: "get_weather", description: "Weather now.",
                   input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
  const conversation = [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: [{ type: "text", text: "Checking." },
                                   { type: "tool_use", id: "toolu_01", name: "get_weather", input: { city: "Paris" } }] },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_01", content: "18 C, sunny" }] },
  ];
  const roundTrip = await client.messages.create({ model, max_tokens: 6, temperature: 0, tools, messages: conversation });
  assert.equal(roundTrip.usage.input_tokens, templateTokens({
    enable_thinking: false,
    tools: [{ type: "function", function: { name: "get_weather", description: "Weather now.", parameters: tools[0].input_schema } }],
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "Checking.", tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }] },
      { role: "tool", content: "18 C, sunny" },
    ],
  }));
  assert.equal((await client.messages.countTokens({ model, tools, messages: conversation })).input_tokens,
               roundTrip.usage.input_tokens);

  // A forced tool: the random model's arguments are rarely a JSON object, so the reply is its
  // text (the call as written) unless they are; streamed, the helpers rebuild the same blocks.
  const forced = { model, max_tokens: 8, temperature: 0, tools, tool_choice: { type: "tool", name: "get_weather" },
                   messages: [{ role: "user", content: "Weather in Oslo?" }] };
  const forcedWhole = await client.messages.create(forced);
  for (const b of forcedWhole.content) {
    if (b.type === "tool_use") assert.equal(b.name, "get_weather");
    else assert.ok(b.text.startsWith('<tool_call>\n{"name": "get_weather", "arguments":'), b.text);
  }
  const forcedFinal = await client.messages.stream(forced).finalMessage();
  const withoutIds = (m) => m.content.map(({ id, ...rest }) => rest);
  assert.deepEqual(withoutIds(forcedFinal), withoutIds(forcedWhole));
  assert.equal(forcedFinal.stop_reason, forcedWhole.stop_reason);

  // Stop sequences: the reply's last character ends it, and is named.
  const chars = [...wholeText];
  if (chars.length > 1) {
    const stop = chars.at(-1);
    const cut = await client.messages.create({ ...ask, stop_sequences: [stop] });
    assert.equal(cut.stop_reason, "stop_sequence");
    assert.equal(cut.stop_sequence, stop);
    assert.equal(cut.content.map((b) => b.text).join(""), wholeText.slice(0, wholeText.indexOf(stop)));
  }

  // Errors arrive as the client's typed errors, in Anthropic's shape.
  await assert.rejects(client.messages.create({ ...ask, temperature: 1.5 }),
                       (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === "invalid_request_error");
  await assert.rejects(client.messages.create({ ...ask, model: "no-such-model" }), (e) => e instanceof Anthropic.NotFoundError);
  const wrongKey = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrongKey.messages.create(ask), (e) => e instanceof Anthropic.AuthenticationError);
  console.log("anthropic client: all checks passed");
} finally {
  server.kill("SIGTERM");
  await new Promise((r) => server.on("exit", r));
}
