// Random text for tokenizer tests: a mix of the things a byte-level BPE pre-tokenizer treats
// differently (letters of many scripts, digits, punctuation, every kind of whitespace,
// contractions, combining marks and decomposed text that NFC changes, emoji sequences, special
// tokens and near-misses of them).
#pragma once

#include <random>
#include <string>

namespace ninfer::test {

struct RandomTextOptions {
  int min_fragments = 1;
  int max_fragments = 30;
  bool special_tokens = true;  // include <|im_start|>, <think>, ... (and near misses)
};

std::string random_text(std::mt19937_64& rng, const RandomTextOptions& options = {});

// Only characters of 2 to 4 UTF-8 bytes (CJK, emoji, accented letters ...), for decoder tests.
std::string random_multibyte_text(std::mt19937_64& rng, int characters);

// Makes a string printable in a test failure message (control characters and non-ASCII escaped).
std::string escaped(const std::string& text);

} // namespace ninfer::test
