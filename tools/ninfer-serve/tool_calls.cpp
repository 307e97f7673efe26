#include "tool_calls.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace ninfer::tools {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

// A header longer than this without being complete is not a call: its text is released as
// content rather than held back for ever.
constexpr size_t kMaxHeaderBytes = 4096;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The longest end of `s` that is the start of `tag` but not all of it: the tag may be
// completing in the next piece.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

std::string_view rstrip_space(std::string_view s) {
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Raw arguments less what closes the call after them: whitespace, one `}`, whitespace.
std::string_view strip_call_close(std::string_view s) {
  s = rstrip_space(s);
  if (!s.empty() && s.back() == '}') s = rstrip_space(s.substr(0, s.size() - 1));
  return s;
}

void add(std::vector<ToolCallEvent>& out, ToolCallEvent::Kind kind, size_t call, std::string_view text) {
  using K = ToolCallEvent::Kind;
  if (text.empty() && (kind == K::Content || kind == K::Arguments)) return;
  // One event per kind of text and call, however many pieces it was settled in.
  if (!out.empty() && out.back().kind == kind && out.back().call == call && (kind == K::Content || kind == K::Arguments)) {
    out.back().text += text;
    return;
  }
  out.push_back({kind, call, std::string(text)});
}

// The header of a call, from after `<tool_call>` to where its arguments begin.
struct Header {
  // AwaitingValue: all but the arguments' first character (Incomplete otherwise).
  enum class State { Incomplete, AwaitingValue, NotACall, Complete } state = State::Incomplete;
  std::string name;
  size_t length = 0; // bytes before the arguments' first character
};

Header read_header(std::string_view s, const ToolCallOptions& o, bool forced) {
  using S = Header::State;
  size_t i = 0;
  auto space = [&] {
    while (i < s.size() && is_space(s[i])) ++i;
  };
  // 1: `t` is there (and skipped), 0: the text ends within it, -1: something else is there.
  auto literal = [&](std::string_view t) {
    const size_t n = std::min(t.size(), s.size() - i);
    if (s.substr(i, n) != t.substr(0, n)) return -1;
    if (n < t.size()) return 0;
    i += t.size();
    return 1;
  };
  Header h;
  for (std::string_view part : {"{", "\"name\"", ":"}) {
    space();
    if (int r = literal(part); r <= 0) return {r < 0 ? S::NotACall : S::Incomplete, {}, 0};
  }
  space();
  if (i == s.size()) return h;
  if (s[i] != '"') return {S::NotACall, {}, 0};
  const size_t start = i++;
  for (bool escaped = false; i < s.size(); ++i) {
    if (escaped) escaped = false;
    else if (s[i] == '\\') escaped = true;
    else if (s[i] == '"') break;
  }
  if (i == s.size()) return h;
  ++i;
  try {
    h.name = nlohmann::json::parse(s.substr(start, i - start)).get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return {S::NotACall, {}, 0};
  }
  if (std::find(o.names.begin(), o.names.end(), h.name) == o.names.end()) return {S::NotACall, {}, 0};
  for (std::string_view part : {",", "\"arguments\"", ":"}) {
    space();
    if (int r = literal(part); r <= 0) return {r < 0 ? S::NotACall : S::Incomplete, {}, 0};
  }
  space();
  h.length = i;
  if (i == s.size()) {
    h.state = S::AwaitingValue;
    return h;
  }
  if (s[i] != '{' && !forced) return {S::NotACall, {}, 0};
  h.state = S::Complete;
  h.length = i;
  return h;
}

} // namespace

ToolCallParser::ToolCallParser(ToolCallOptions options) : options_(std::move(options)) {
  pending_ = options_.prefix;
  forced_next_ = options_.forced;
}

std::vector<ToolCallEvent> ToolCallParser::push(std::string_view text) {
  std::vector<ToolCallEvent> out;
  pending_ += text;
  run(out, false);
  return out;
}

std::vector<ToolCallEvent> ToolCallParser::finish() {
  std::vector<ToolCallEvent> out;
  run(out, true);
  return out;
}

void ToolCallParser::run(std::vector<ToolCallEvent>& out, bool at_end) {
  // Each step settles what it can and says whether another mode should look at the rest.
  for (bool more = true; more;) {
    const Mode before = mode_;
    switch (mode_) {
      case Mode::Content: content(out, at_end); break;
      case Mode::Header: header(out, at_end); break;
      case Mode::Arguments: arguments(out, at_end); break;
      case Mode::RawArguments: raw_arguments(out, at_end); break;
      case Mode::Trailer: trailer(out, at_end); break;
    }
    more = mode_ != before;
  }
}

void ToolCallParser::emit_content(std::vector<ToolCallEvent>& out, std::string_view text) {
  if (after_call_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_call_ = false;
  }
  add(out, ToolCallEvent::Kind::Content, 0, text);
}

void ToolCallParser::content(std::vector<ToolCallEvent>& out, bool at_end) {
  const size_t at = pending_.find(kOpen);
  if (at != std::string::npos) {
    // The whitespace before the tag is the template's separator if the block is a call.
    const std::string_view before = rstrip_space(std::string_view(pending_).substr(0, at));
    emit_content(out, before);
    space_before_ = pending_.substr(before.size(), at - before.size());
    raw_ = kOpen;
    pending_.erase(0, at + kOpen.size());
    mode_ = Mode::Header;
    return;
  }
  if (at_end) {
    // Whitespace at the end of a reply that made calls is not content either.
    emit_content(out, calls_ > 0 ? rstrip_space(pending_) : std::string_view(pending_));
    pending_.clear();
    return;
  }
  // Held back: a tag that may be completing, and whitespace that may precede one.
  const size_t keep = rstrip_space(std::string_view(pending_).substr(0, pending_.size() - partial_tag(pending_, kOpen))).size();
  emit_content(out, std::string_view(pending_).substr(0, keep));
  pending_.erase(0, keep);
}

bool ToolCallParser::header(std::vector<ToolCallEvent>& out, bool at_end) {
  Header h = read_header(pending_, options_, forced_next_);
  using S = Header::State;
  const bool waiting = h.state == S::Incomplete || h.state == S::AwaitingValue;
  if (waiting && !at_end && pending_.size() <= kMaxHeaderBytes) return false;
  // A forced call the model wrote nothing of still is the call, with empty arguments.
  if (h.state == S::AwaitingValue && forced_next_) h.state = S::Complete;
  forced_next_ = false;
  if (h.state != S::Complete) {
    // Not a call: the tag and what follows it are content, read again as such.
    emit_content(out, space_before_ + raw_);
    space_before_.clear();
    raw_.clear();
    mode_ = Mode::Content;
    return true;
  }
  space_before_.clear();
  raw_ += pending_.substr(0, h.length);
  pending_.erase(0, h.length);
  add(out, ToolCallEvent::Kind::CallStart, calls_, h.name);
  depth_ = 0;
  in_string_ = escaped_ = false;
  mode_ = !pending_.empty() && pending_.front() == '{' ? Mode::Arguments : Mode::RawArguments;
  return true;
}

void ToolCallParser::arguments(std::vector<ToolCallEvent>& out, bool at_end) {
  size_t i = 0;
  bool complete = false, closed = false;
  for (; i < pending_.size(); ++i) {
    const char c = pending_[i];
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (c == '<') {
      // `</tool_call>` outside a string ends the call even if the object is unfinished.
      const std::string_view rest = std::string_view(pending_).substr(i);
      if (rest.starts_with(kClose)) {
        closed = true;
        break;
      }
      if (!at_end && kClose.starts_with(rest)) break; // may be completing: wait
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      ++i;
      complete = true;
      break;
    }
  }
  add(out, ToolCallEvent::Kind::Arguments, calls_, std::string_view(pending_).substr(0, i));
  raw_ += pending_.substr(0, i);
  pending_.erase(0, i);
  if (complete) {
    mode_ = Mode::Trailer;
  } else if (closed) {
    raw_ += kClose;
    pending_.erase(0, kClose.size());
    end_call(out);
  } else if (at_end) {
    end_call(out);
  }
}

void ToolCallParser::raw_arguments(std::vector<ToolCallEvent>& out, bool at_end) {
  const size_t at = pending_.find(kClose);
  if (at != std::string::npos || at_end) {
    const size_t end = at == std::string::npos ? pending_.size() : at;
    add(out, ToolCallEvent::Kind::Arguments, calls_, strip_call_close(std::string_view(pending_).substr(0, end)));
    raw_ += pending_.substr(0, at == std::string::npos ? end : end + kClose.size());
    pending_.erase(0, at == std::string::npos ? end : end + kClose.size());
    end_call(out);
    return;
  }
  // Held back: a closing tag that may be completing, and the call's `}` that may precede it.
  const std::string_view sure =
      strip_call_close(std::string_view(pending_).substr(0, pending_.size() - partial_tag(pending_, kClose)));
  add(out, ToolCallEvent::Kind::Arguments, calls_, sure);
  raw_ += sure;
  pending_.erase(0, sure.size());
}

void ToolCallParser::trailer(std::vector<ToolCallEvent>& out, bool at_end) {
  size_t i = 0;
  while (i < pending_.size() && (is_space(pending_[i]) || pending_[i] == '}')) ++i;
  const std::string_view rest = std::string_view(pending_).substr(i);
  if (rest.starts_with(kClose)) {
    raw_ += pending_.substr(0, i + kClose.size());
    pending_.erase(0, i + kClose.size());
    end_call(out);
    return;
  }
  if (!at_end && kClose.starts_with(rest)) return; // the close may still come
  // Other text after the arguments: the call ends there and the text is content again.
  raw_ += pending_.substr(0, i);
  pending_.erase(0, i);
  end_call(out);
}

void ToolCallParser::end_call(std::vector<ToolCallEvent>& out) {
  add(out, ToolCallEvent::Kind::CallEnd, calls_, raw_);
  ++calls_;
  raw_.clear();
  after_call_ = true;
  mode_ = Mode::Content;
}

ParsedAnswer parse_tool_calls(std::string_view text, const ToolCallOptions& options) {
  ToolCallParser parser(options);
  std::vector<ToolCallEvent> events = parser.push(text);
  for (ToolCallEvent& e : parser.finish()) events.push_back(std::move(e));
  ParsedAnswer out;
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::Content: out.content += e.text; break;
      case ToolCallEvent::Kind::CallStart: out.calls.push_back({e.text, {}, {}}); break;
      case ToolCallEvent::Kind::Arguments: out.calls[e.call].arguments += e.text; break;
      case ToolCallEvent::Kind::CallEnd: out.calls[e.call].raw = e.text; break;
    }
  }
  return out;
}

} // namespace ninfer::tools
