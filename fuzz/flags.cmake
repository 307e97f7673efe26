# NINFER_FUZZ: libFuzzer binaries for the targets in fuzz/ (fuzz/README.md). They need clang,
# and the code they call must be instrumented too, so the whole build gets AddressSanitizer,
# UBSan and libFuzzer's coverage hooks. Included before any target is defined.
option(NINFER_FUZZ "Build the libFuzzer targets in fuzz/ (clang; instruments the whole build with ASan + UBSan)" OFF)
if(NINFER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "NINFER_FUZZ needs clang's libFuzzer: configure a separate build with "
                        "-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DNINFER_CUDA=OFF")
  endif()
  add_compile_options(-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -gline-tables-only)
  add_link_options(-fsanitize=address,undefined)
endif()
