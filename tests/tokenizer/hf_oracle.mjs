// Independent reference for ninfer's tokenizer: runs @huggingface/tokenizers (the JavaScript
// port of Hugging Face's tokenizers, pinned in package.json) on texts and writes what it
// produces, in the format of tests/fixtures/tokenizer/qwen3-golden.json.
//
//   node tests/tokenizer/hf_oracle.mjs TOKENIZER_JSON TEXTS_JSON OUT_JSON
//
// TEXTS_JSON is a JSON array of strings. Encoding adds no special tokens but recognises those in
// the text, as ninfer does. With TEXTS_JSON listing the golden texts this regenerates the
// golden fixture.
import { Tokenizer } from "@huggingface/tokenizers";
import fs from "node:fs";
import path from "node:path";

const [tokenizerPath, textsPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node hf_oracle.mjs TOKENIZER_JSON TEXTS_JSON OUT_JSON");
  process.exit(2);
}
const tokenizerJson = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const configPath = path.join(path.dirname(tokenizerPath), "tokenizer_config.json");
const tokenizerConfig = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);

const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
const cases = texts.map((text) => {
  const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
  // decode() refuses an empty list; the text of no tokens is "".
  const decoded = ids.length ? tokenizer.decode(ids) : "";
  return { text, ids, decoded };
});
const version = JSON.parse(
  fs.readFileSync(new URL("../../node_modules/@huggingface/tokenizers/package.json", import.meta.url), "utf8"),
).version;
fs.writeFileSync(
  outPath,
  JSON.stringify({ tokenizer: tokenizerPath, oracle: `@huggingface/tokenizers@${version}`, cases }),
);
