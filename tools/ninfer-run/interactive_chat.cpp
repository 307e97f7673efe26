#include "interactive_chat.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <optional>

#include "ninfer/checkpoint/progress.hpp"
#include "ninfer/tokenizer/chat_format.hpp"
#include "run_request.hpp"
#include "tool_cli.hpp"

namespace ninfer::tools {
namespace {

std::atomic<bool> g_interrupted{false}; // lock-free: safe to store from the signal handler
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) { g_interrupted.store(true); }

// Ctrl-C sets the flag instead of ending the process; generation and the prompt's reader look
// at it.
void catch_sigint() {
  struct sigaction sa{};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
}

enum class Input { Line, End, Interrupted };

// One line of stdin without its newline. Read a byte at a time with poll() in short rounds, so a
// Ctrl-C that lands just before the read (not inside it) is seen too.
Input read_line(std::string& line) {
  line.clear();
  for (;;) {
    if (g_interrupted.load()) return Input::Interrupted;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) return Input::End;
    if (ready <= 0) continue;
    char c = 0;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line.empty() ? Input::End : Input::Line;
    if (c == '\n') return Input::Line;
    line.push_back(c);
  }
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

class ChatSession {
 public:
  ChatSession(const RunOptions& o, const Tokenizer& tok, CausalLM& lm, const GenerationRequest& base, RunContext ctx)
      : o_(o), tok_(tok), lm_(lm), base_(base), ctx_(std::move(ctx)) {}

  void reset() {
    history_.clear();
    lm_.reset(0);
    held_.clear();
  }

  // Answers `message`; returns false when the turn could not run (the message is dropped).
  bool turn(const std::string& message) {
    history_.push_back({"user", message, std::nullopt});
    std::vector<ChatMessage> msgs;
    if (o_.system) msgs.push_back({"system", *o_.system, std::nullopt});
    msgs.insert(msgs.end(), history_.begin(), history_.end());
    const std::vector<int32_t> ids = tok_.encode(format_chat(msgs, ChatOptions{true, !o_.no_think}));
    const int64_t room = lm_.options().max_context - static_cast<int64_t>(ids.size());
    if (room < 1) {
      fmt::print(stderr, "ninfer-run: the conversation ({} tokens) fills the context of {}: /reset to start again, or "
                         "raise --max-context\n",
                 ids.size(), lm_.options().max_context);
      history_.pop_back();
      return false;
    }
    GenerationRequest req = base_;
    const size_t reused = keep_shared_prefix(ids);
    req.append = reused > 0;
    req.prompt_ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(reused), ids.end());
    req.max_new_tokens = std::min(base_.max_new_tokens, room);
    req.cancel = &g_interrupted;
    spdlog::debug("turn {}: {} prompt tokens, {} of them already in the KV cache", turns_ + 1, ids.size(), reused);

    TextSink sink;
    if (!o_.json)
      sink = [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      };
    std::optional<ProgressLine> bar;
    auto progress = [&](int64_t done, int64_t total) {
      if (total <= lm_.options().prefill_chunk) return; // one chunk: nothing to watch
      if (!bar) bar.emplace("prefill", total);
      bar->update(done);
      if (done == total) bar->finish();
    };
    const GenerationResult res = generate(lm_, 0, &tok_, req, sink, progress);
    g_interrupted.store(false);
    ++turns_;
    remember_slot(ids, res);
    history_.push_back({"assistant", res.text, std::nullopt});

    if (o_.json) {
      RunContext c = ctx_;
      c.prompt_ids = ids;
      nlohmann::json j = result_json(c, res);
      j["turn"] = turns_;
      j["reused_prompt_tokens"] = reused;
      std::cout << j.dump() << "\n" << std::flush;
    } else {
      std::cout << "\n" << std::flush;
    }
    if (res.finish_reason == "cancelled") fmt::print(stderr, "ninfer-run: answer stopped\n");
    return true;
  }

 private:
  // What the slot holds and the new prompt share stays in the cache: all of the slot when it is a
  // prefix of the prompt; else, for a model whose state is only KV rows, the shared part (the
  // template drops an earlier answer's <think> block, so a thinking model's history diverges
  // where its last answer began). Otherwise the slot is reset and the whole prompt prefilled.
  size_t keep_shared_prefix(const std::vector<int32_t>& ids) {
    size_t shared = common_prefix(held_, ids);
    if (shared == ids.size()) --shared; // at least one token must be prefilled for the logits
    if (shared == held_.size() && shared > 0) return shared;
    if (shared > 0 && lm_.can_truncate()) {
      lm_.truncate(0, static_cast<int64_t>(shared));
      held_.resize(shared);
      return shared;
    }
    held_.clear();
    return 0;
  }

  // generate() leaves in the slot a prefix of prompt + generated + [stop token] (a decode step
  // may have run past the last token read); beyond what is known, the slot is reset.
  void remember_slot(const std::vector<int32_t>& ids, const GenerationResult& res) {
    std::vector<int32_t> known = ids;
    known.insert(known.end(), res.generated_ids.begin(), res.generated_ids.end());
    if (res.stop_token) known.push_back(*res.stop_token);
    const int64_t pos = lm_.position(0);
    if (pos <= static_cast<int64_t>(known.size())) {
      known.resize(static_cast<size_t>(pos));
      held_ = std::move(known);
    } else {
      lm_.reset(0);
      held_.clear();
    }
  }

  const RunOptions& o_;
  const Tokenizer& tok_;
  CausalLM& lm_;
  GenerationRequest base_;
  RunContext ctx_;
  std::vector<ChatMessage> history_;
  std::vector<int32_t> held_; // the tokens slot 0 holds, in order
  int64_t turns_ = 0;
};

} // namespace

int run_interactive(const RunOptions& o, const Manifest& m, const Tokenizer& tok, CausalLM& lm,
                    const GenerationRequest& base, RunContext ctx) {
  const bool terminal = ::isatty(STDIN_FILENO) == 1;
  catch_sigint(); // before the banner: once it is shown, Ctrl-C is the chat's
  fmt::print(stderr, "ninfer-run: chatting with {} on {} (context {} tokens). /reset starts over, /exit or Ctrl-D "
                     "quits, Ctrl-C stops an answer.\n",
             m.name, ctx.device, lm.options().max_context);
  ChatSession chat(o, tok, lm, base, std::move(ctx));
  const std::string first = prompt_text(o);
  if (!first.empty()) chat.turn(first);
  std::string line;
  for (;;) {
    if (terminal && !o.json) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    const Input in = read_line(line);
    if (in == Input::Interrupted) {
      if (terminal) std::fputs("\n", stdout);
      return kExitInterrupted;
    }
    if (in == Input::End || line == "/exit" || line == "/quit") return kExitOk;
    if (line == "/reset") {
      chat.reset();
      fmt::print(stderr, "ninfer-run: new conversation\n");
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    chat.turn(line);
  }
}

} // namespace ninfer::tools
