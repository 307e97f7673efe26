# Makes `cmake --install` produce a relocatable tree: every shared library our binaries need
# that is not part of the base system (yaml-cpp, spdlog, fmt, ICU, PCRE2, the CUDA runtime ...)
# is copied into lib/, where the RPATHs ($ORIGIN/../lib, $ORIGIN/../..) find it. The C/C++
# runtime, the NVIDIA driver and the CUDA toolkit's cuBLAS / cuBLASLt (~600 MB; found through
# the RPATH's toolkit entry, see NINFER_CUDA_LIB_RPATH) stay with the target system.
get_property(NINFER_BUNDLE_TARGETS GLOBAL PROPERTY NINFER_INSTALLED_BINARIES)
get_property(NINFER_BUNDLE_PLUGINS GLOBAL PROPERTY NINFER_CUDA_PLUGINS)
set(bundle_exes "")
foreach(t IN LISTS NINFER_BUNDLE_TARGETS)
  string(APPEND bundle_exes " \"$<TARGET_FILE:${t}>\"")
endforeach()
set(bundle_modules " \"$<TARGET_FILE:cpu>\"")
foreach(t IN LISTS NINFER_BUNDLE_PLUGINS)
  string(APPEND bundle_modules " \"$<TARGET_FILE:${t}>\"")
endforeach()

install(CODE "
  file(GET_RUNTIME_DEPENDENCIES
    EXECUTABLES ${bundle_exes}
    LIBRARIES \"$<TARGET_FILE:ninfer_core>\"
    MODULES ${bundle_modules}
    RESOLVED_DEPENDENCIES_VAR ninfer_deps
    UNRESOLVED_DEPENDENCIES_VAR ninfer_missing
    DIRECTORIES \"$<TARGET_FILE_DIR:ninfer_core>\"
    PRE_EXCLUDE_REGEXES \"libninfer_core\"
    POST_EXCLUDE_REGEXES
      \"/ld-linux\" \"/libc\\\\.so\" \"/libm\\\\.so\" \"/libdl\\\\.so\" \"/librt\\\\.so\" \"/libpthread\\\\.so\"
      \"/libgcc_s\\\\.so\" \"/libstdc\\\\+\\\\+\\\\.so\" \"/libcuda\\\\.so\" \"/libz\\\\.so\"
      \"/libcublas\")
  foreach(dep IN LISTS ninfer_deps)
    message(STATUS \"Bundling \${dep}\")
    file(INSTALL \"\${dep}\" DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\" FOLLOW_SYMLINK_CHAIN)
  endforeach()
  foreach(dep IN LISTS ninfer_missing)
    if(NOT dep MATCHES \"libcuda\\\\.so\")
      message(WARNING \"ninfer install: cannot resolve \${dep}; the installed tree may not run elsewhere\")
    endif()
  endforeach()
")
