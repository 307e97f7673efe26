#include "regex_split.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include "ninfer/support/error.hpp"

namespace ninfer::tokenizer_detail {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// The JIT's default 32 KiB stack is too small for patterns like `\s+(?!\S)` on very long
// whitespace runs; each thread gets its own larger stack, created once.
pcre2_jit_stack* thread_jit_stack() {
  struct Holder {
    pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    ~Holder() { pcre2_jit_stack_free(stack); }
  };
  thread_local Holder holder;
  return holder.stack;
}

} // namespace

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

RegexSplitter::RegexSplitter(const std::string& pattern, const std::string& where)
    : compiled_(std::make_unique<Compiled>()), where_(where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UTF: work on code points; UCP: \s, \d, \w and POSIX classes follow Unicode properties, as
  // the Rust and JavaScript regex engines that tokenizer files are written for do. NO_UTF_CHECK
  // at match time is safe because the tokenizer validates its input once, up front.
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!compiled_->code)
    throw Error(fmt::format("{}: the pre-tokenizer regex does not compile at offset {}: {} (pattern: {})", where,
                            offset, pcre2_message(error), pattern));
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

void RegexSplitter::split(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(compiled_->code, nullptr), &pcre2_match_data_free);
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_create(nullptr), &pcre2_match_context_free);
  if (compiled_->jit) pcre2_jit_stack_assign(context.get(), nullptr, thread_jit_stack());

  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;     // where the next search starts
  size_t emitted = 0; // end of the last pre-token handed out
  while (pos < text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.get(),
                               context.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      throw Error(fmt::format("{}: the pre-tokenizer regex failed on a {}-byte text: {}", where_, text.size(),
                              pcre2_message(rc)));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
    const size_t start = ov[0], end = ov[1];
    if (start > emitted) piece(text.substr(emitted, start - emitted));
    if (end > start) {
      piece(text.substr(start, end - start));
      emitted = end;
      pos = end;
    } else {
      // An empty match: step over one whole code point so the search cannot stall.
      emitted = start;
      pos = start + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
  if (emitted < text.size()) piece(text.substr(emitted));
}

} // namespace ninfer::tokenizer_detail
