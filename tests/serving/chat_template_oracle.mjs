// Renders chat prompts with a model's own chat template through @huggingface/jinja (the
// Jinja implementation transformers.js uses; its tojson writes Python's json.dumps form), as
// the independent reference for ninfer's chat format.
//   node chat_template_oracle.mjs TOKENIZER_CONFIG_JSON CASES_JSON OUT_JSON
// CASES_JSON: [{"messages": [...], "tools": [...] or null, "enable_thinking": bool}, ...]
// OUT_JSON: the rendered prompts, in order (add_generation_prompt on).
import { readFileSync, writeFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const [configPath, casesPath, outPath] = process.argv.slice(2);
const template = new Template(JSON.parse(readFileSync(configPath, "utf8")).chat_template);
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
const out = cases.map((c) => {
  const context = { messages: c.messages, add_generation_prompt: true, enable_thinking: c.enable_thinking };
  if (c.tools) context.tools = c.tools;
  return template.render(context);
});
writeFileSync(outPath, JSON.stringify(out));
