// The one exception type ninfer throws for user-facing problems: its message names what is
// wrong and, where there is one, the fix. Tools print it and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace ninfer {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

} // namespace ninfer
