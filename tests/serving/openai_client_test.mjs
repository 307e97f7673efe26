// ninfer-serve driven by the official `openai` npm client (pinned in package.json): a
// random-weight Qwen3.5 checkpoint with the real Qwen3 tokenizer, served on loopback. The
// Anthropic client has its own test (anthropic_client_test.mjs).
//   node openai_client_test.mjs NINFER_SERVE NINFER_MAKE_CHECKPOINT TOKENIZER_JSON
// Exits non-zero (with the failed assertion) when the server disagrees with what the client
// expects of an OpenAI-compatible API.
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";

const [serveBin, makeCheckpointBin, tokenizer] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), "ninfer-openai-"));
// Removed however the test ends (a failed start throws before the try below).
process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
const ckpt = join(dir, "demo");
execFileSync(makeCheckpointBin, ["--preset", "qwen3_5-cpu-small", "--seed", "5", "--tokenizer", tokenizer, "--out", ckpt],
             { stdio: "ignore" });

const server = spawn(serveBin, ["--checkpoint", ckpt, "--host", "127.0.0.1", "--port", "0", "--max-concurrency", "2"],
                     { stdio: ["ignore", "ignore", "pipe"] });
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

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
try {
  const models = await client.models.list();
  const model = models.data[0].id;
  assert.ok(model, "GET /v1/models lists the served model");

  const ask = { model, messages: [{ role: "user", content: "Name three colours." }], max_tokens: 12, temperature: 0 };
  const solo = await client.chat.completions.create(ask);
  assert.equal(solo.object, "chat.completion");
  assert.equal(typeof solo.choices[0].message.content, "string");
  assert.equal(solo.choices[0].message.role, "assistant");
  assert.ok(["length", "stop"].includes(solo.choices[0].finish_reason));
  assert.ok(solo.usage.prompt_tokens > 0 && solo.usage.completion_tokens <= 12);

  // Streaming: the deltas join to the non-streamed (greedy) reply; usage comes last.
  const stream = await client.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true } });
  let text = "", usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, solo.choices[0].message.content);
  assert.equal(finish, solo.choices[0].finish_reason);
  assert.deepEqual(usage, solo.usage);

  // Concurrent requests (more than the two slots) each get their solo answer.
  const prompts = ["Hello", "Tell me a joke.", "2+2=", "Why?"];
  const solos = [];
  for (const p of prompts)
    solos.push((await client.chat.completions.create({ ...ask, messages: [{ role: "user", content: p }] })).choices[0].message.content);
  const together = await Promise.all(prompts.map((p) => client.chat.completions.create({ ...ask, messages: [{ role: "user", content: p }] })));
  together.forEach((r, i) => assert.equal(r.choices[0].message.content, solos[i], `concurrent request ${i}`));

  // Legacy completions with a text prompt.
  const comp = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
  assert.equal(comp.object, "text_completion");
  assert.equal(typeof comp.choices[0].text, "string");

  // Logprobs: one entry per generated token with its text, bytes and the 3 best alternatives
  // (greedy: the chosen token is the best); streamed chunks carry the same entries in order.
  const lp = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 3 });
  const entries = lp.choices[0].logprobs.content;
  assert.equal(lp.choices[0].message.content, solo.choices[0].message.content);
  assert.equal(entries.length, lp.usage.completion_tokens);
  for (const e of entries) {
    assert.equal(typeof e.token, "string");
    assert.ok(Array.isArray(e.bytes) && e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].logprob, e.logprob);
    assert.ok(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob);
  }
  const lpStream = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 3, stream: true });
  const streamedEntries = [];
  for await (const chunk of lpStream)
    for (const c of chunk.choices) streamedEntries.push(...(c.logprobs?.content ?? []));
  assert.deepEqual(streamedEntries, entries);
  const legacy = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0, logprobs: 2 });
  assert.equal(legacy.choices[0].logprobs.tokens.length, 5);
  assert.equal(legacy.choices[0].logprobs.token_logprobs.length, 5);
  // echo with max_tokens 0 scores the prompt (lm-evaluation-harness's request): the text is the
  // prompt, its first token has no logprob, the others are log-probabilities (<= 0).
  const scored = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 0, echo: true, logprobs: 1 });
  assert.equal(scored.choices[0].text, "Once upon a time");
  const tl = scored.choices[0].logprobs.token_logprobs;
  assert.equal(tl[0], null);
  assert.ok(tl.length >= 3 && tl.slice(1).every((x) => typeof x === "number" && x <= 0), JSON.stringify(tl));
  // Streamed with echo: the first chunk is the prompt with its logprobs, the chunks together
  // are the whole reply's text and logprobs.
  const echoAsk = { model, prompt: "Once upon a time", max_tokens: 3, temperature: 0, echo: true, logprobs: 1 };
  const echoed = await client.completions.create(echoAsk);
  const echoStream = await client.completions.create({ ...echoAsk, stream: true });
  let echoText = "", echoLogprobs = [], firstEcho = null;
  for await (const chunk of echoStream) {
    const c = chunk.choices[0];
    if (!c) continue;
    if (firstEcho === null) firstEcho = c.text;
    echoText += c.text;
    if (c.logprobs) echoLogprobs.push(...c.logprobs.token_logprobs);
  }
  assert.equal(firstEcho, "Once upon a time");
  assert.equal(echoText, echoed.choices[0].text);
  assert.equal(echoLogprobs.length, echoed.choices[0].logprobs.token_logprobs.length);
  assert.equal(echoLogprobs[0], null);
  // logit_bias: +100 on one token id makes it the whole greedy reply.
  const biased = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 3, temperature: 0,
                                                   logit_bias: { "300": 100 }, logprobs: 0 });
  assert.equal(biased.choices[0].logprobs.tokens.length, 3);
  assert.equal(new Set(biased.choices[0].logprobs.tokens).size, 1, JSON.stringify(biased.choices[0].logprobs.tokens));
  await assert.rejects(client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 21 }),
                       (e) => e.status === 400 && /top_logprobs/.test(e.message));

  // Qwen's thinking switch: on by default (reasoning_content is returned separately), off adds
  // the empty think block to the prompt (4 tokens) and returns plain content.
  const thinkOff = await client.chat.completions.create({ ...ask, chat_template_kwargs: { enable_thinking: false } });
  assert.equal(thinkOff.usage.prompt_tokens, solo.usage.prompt_tokens + 4);
  assert.ok(!("reasoning_content" in thinkOff.choices[0].message));
  assert.ok("reasoning_content" in solo.choices[0].message);

  // n choices (each the greedy reply here), the newer max_completion_tokens, seed, a stop
  // string and user, as the client sends them; streamed choices carry their own index.
  const two = await client.chat.completions.create({ ...ask, n: 2, user: "client-test" });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  for (const c of two.choices) assert.equal(c.message.content, solo.choices[0].message.content);
  assert.equal(two.usage.completion_tokens, 2 * solo.usage.completion_tokens);
  const twoStream = await client.chat.completions.create({ ...ask, n: 2, stream: true });
  const perIndex = ["", ""];
  for await (const chunk of twoStream) for (const c of chunk.choices) perIndex[c.index] += c.delta?.content ?? "";
  assert.deepEqual(perIndex, [solo.choices[0].message.content, solo.choices[0].message.content]);
  const { max_tokens: _, ...askNoMax } = ask;
  const newer = await client.chat.completions.create({ ...askNoMax, max_completion_tokens: 12 });
  assert.equal(newer.choices[0].message.content, solo.choices[0].message.content);
  const seeded = { ...ask, temperature: 1, seed: 11 };
  const s1 = await client.chat.completions.create(seeded), s2 = await client.chat.completions.create(seeded);
  assert.equal(s1.choices[0].message.content, s2.choices[0].message.content);
  const answer = solo.choices[0].message.content;
  if (answer.length > 1) {
    const stop = [...answer].at(-1); // the last character
    const cut = await client.chat.completions.create({ ...ask, stop });
    assert.equal(cut.choices[0].message.content, answer.slice(0, answer.indexOf(stop)));
  }

  // Tools. The random model writes no call of its own accord; a named tool_choice prefills the
  // call, so what it writes next is the call's arguments: the client gets a tool call, whole
  // and streamed (the stream helper's accumulated message equals the whole one).
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather now.",
                                                 parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  const forced = { ...ask, tools, tool_choice: { type: "function", function: { name: "get_weather" } } };
  const call = await client.chat.completions.create(forced);
  const calls = call.choices[0].message.tool_calls;
  assert.equal(calls.length, 1);
  assert.match(calls[0].id, /^call_/);
  assert.equal(calls[0].type, "function");
  assert.equal(calls[0].function.name, "get_weather");
  assert.equal(typeof calls[0].function.arguments, "string");
  assert.equal(call.choices[0].message.content, null);
  const callStream = client.chat.completions.stream(forced);
  const streamedCall = await callStream.finalChatCompletion();
  const sCalls = streamedCall.choices[0].message.tool_calls;
  assert.equal(sCalls.length, 1);
  assert.equal(sCalls[0].function.name, "get_weather");
  assert.equal(sCalls[0].function.arguments, calls[0].function.arguments);
  assert.equal(streamedCall.choices[0].finish_reason, call.choices[0].finish_reason);
  // The call and its result go back in; auto and none leave the model's text as it is.
  const roundTrip = await client.chat.completions.create({
    ...ask, tools, tool_choice: "auto",
    messages: [...ask.messages, call.choices[0].message, { role: "tool", tool_call_id: calls[0].id, content: "sunny" }],
  });
  assert.equal(typeof roundTrip.choices[0].message.content, "string");
  assert.ok(roundTrip.usage.prompt_tokens > call.usage.prompt_tokens);
  const noTools = await client.chat.completions.create({ ...ask, tools, tool_choice: "none" });
  assert.equal(noTools.choices[0].message.tool_calls, undefined);
  await assert.rejects(client.chat.completions.create({ ...ask, tools, tool_choice: { type: "function", function: { name: "nope" } } }),
                       (e) => e.status === 400 && e.param === "tool_choice.function.name");

  // Errors arrive as the client's typed errors with OpenAI's status codes.
  await assert.rejects(client.chat.completions.create({ ...ask, model: "no-such-model" }), (e) => e.status === 404);
  await assert.rejects(client.chat.completions.create({ ...ask, temperature: -1 }), (e) => e.status === 400 && /temperature/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...ask, n: 17 }), (e) => e.status === 400 && e.param === "n");
  await assert.rejects(client.chat.completions.create({ ...ask, max_completion_tokens: 5 }),
                       (e) => e.status === 400 && e.param === "max_completion_tokens");
  console.log("openai client: all checks passed");
} finally {
  server.kill("SIGTERM");
  await new Promise((r) => server.on("exit", r));
}
