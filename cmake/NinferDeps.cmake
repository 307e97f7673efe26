# Every dependency comes from the system (Debian packages here, the image's packages on the
# device machine). Versions differ between the two (yaml-cpp 0.7/0.8, spdlog 1.10/1.12), so
# targets are normalised to ninfer::* aliases here and nowhere else.
find_package(Threads REQUIRED)
find_package(yaml-cpp REQUIRED)
if(TARGET yaml-cpp::yaml-cpp)
  add_library(ninfer_dep_yaml ALIAS yaml-cpp::yaml-cpp)
else()
  add_library(ninfer_dep_yaml ALIAS yaml-cpp)
endif()
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 QUIET CONFIG)
find_path(NINFER_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
find_path(NINFER_VALIJSON_INCLUDE valijson/validator.hpp REQUIRED)
find_package(GTest REQUIRED)
