#include "nvrtc_programs.hpp"

#include "nvrtc_sources.hpp"

namespace ninfer::cuda_plugin::nvrtc_sources {

ProgramList::ProgramList() {
  header_names_.reserve(kHeaderCount);
  header_text_.reserve(kHeaderCount);
  for (size_t i = 0; i < kHeaderCount; ++i) {
    header_names_.push_back(kHeaders[i].name);
    header_text_.push_back(kHeaders[i].text);
  }
  names.reserve(kProgramCount); // programs[i].name points into names[i]: no reallocation
  programs.reserve(kProgramCount);
  for (size_t i = 0; i < kProgramCount; ++i) {
    names.push_back(std::string("cuda-generic/") + kPrograms[i].name);
    programs.push_back(ninfer_cuda_program{names.back().c_str(), kPrograms[i].text,
                                           static_cast<int32_t>(header_names_.size()), header_names_.data(),
                                           header_text_.data(), 0, nullptr});
  }
}

} // namespace ninfer::cuda_plugin::nvrtc_sources
