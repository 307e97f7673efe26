// ninfer-run --interactive: a multi-turn chat on the terminal (or any stream of lines on stdin).
#pragma once

#include "ninfer/generation/generate.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/models/causal_lm.hpp"
#include "ninfer/tokenizer/tokenizer.hpp"
#include "run_options.hpp"
#include "run_report.hpp"

namespace ninfer::tools {

// Reads one user message per line from stdin and answers each with the whole conversation as
// context (Qwen's chat template). "/reset" starts a new conversation, "/exit" (or end of input)
// quits with 0; Ctrl-C during an answer stops that answer, Ctrl-C at the prompt quits with 130.
// With --prompt / --prompt-file, that text is the first message. `base`: sampling, stops and
// max_new_tokens of every turn. Returns the exit code.
int run_interactive(const RunOptions& o, const Manifest& m, const Tokenizer& tok, CausalLM& lm,
                    const GenerationRequest& base, RunContext ctx);

} // namespace ninfer::tools
