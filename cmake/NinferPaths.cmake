# Build-tree locations the tools and tests use before anything is installed. Installed
# binaries find the same things relative to their own path (see core/support/paths.cpp).
set(NINFER_BUILD_PLUGIN_DIR ${CMAKE_BINARY_DIR}/lib/ninfer/plugins)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
set(CMAKE_ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
