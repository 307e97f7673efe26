#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "described_cards.hpp"
#include "ninfer/support/error.hpp"

namespace fs = std::filesystem;
using namespace ninfer;
using namespace ninfer::test;

TEST(ArchCatalog, KnowsTheCardsTheIssueLists) {
  // SM counts as stated in issue 2 (vendors' figures), typed independently of arch/devices.yaml.
  const std::vector<std::tuple<const char*, const char*, int>> expected = {
      {"RTX 4080", "sm_89", 76},         {"RTX 4080 SUPER", "sm_89", 80}, {"RTX 4090", "sm_89", 128},
      {"RTX 4090 D", "sm_89", 114},      {"RTX 5080", "sm_120a", 84},     {"RTX 5090", "sm_120a", 170},
      {"RTX 5070 Ti", "sm_120a", 70},    {"L20", "sm_89", 92},            {"L40S", "sm_89", 142},
      {"RTX 6000 Ada", "sm_89", 142},    {"RTX PRO 6000 Blackwell", "sm_120a", 188},
      {"H100 PCIe", "sm_90", 114},       {"H100 SXM", "sm_90", 132},      {"H200", "sm_90", 132}};
  for (const auto& [name, arch, sms] : expected) {
    const KnownDevice* d = catalog().find_device(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_EQ(d->arch, arch) << name;
    EXPECT_EQ(d->sm_count, sms) << name;
    EXPECT_GT(d->memory_gib, 0) << name;
  }
}

TEST(ArchCatalog, DescribedDeviceCarriesItsArchitectureLimits) {
  const ninfer_device_info d = catalog().describe(catalog().require_device("RTX 4080 SUPER"));
  EXPECT_EQ(d.sm_count, 80);
  EXPECT_EQ(d.cc_major, 8);
  EXPECT_EQ(d.cc_minor, 9);
  EXPECT_EQ(d.regs_per_sm, 65536);
  EXPECT_EQ(d.max_threads_per_sm, 1536);
  EXPECT_EQ(d.described, 1);
  EXPECT_EQ(d.ordinal, -1);
}

TEST(ArchCatalog, MatchesDriverNamesAndIgnoresCase) {
  EXPECT_EQ(catalog().find_device("NVIDIA GeForce RTX 4080 SUPER")->name, "RTX 4080 SUPER");
  EXPECT_EQ(catalog().find_device("nvidia h200")->name, "H200");
  EXPECT_EQ(catalog().find_device("rtx 5090")->name, "RTX 5090");
  EXPECT_EQ(catalog().find_device("RTX 3090"), nullptr);
}

TEST(ArchCatalog, UnknownModelListsTheKnownOnes) {
  try {
    catalog().require_device("RTX 9999");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown device model 'RTX 9999'"), std::string::npos) << m;
    EXPECT_NE(m.find("RTX 4080 SUPER"), std::string::npos) << m;
  }
}

namespace {

// A scratch arch/ folder: the real archs.yaml plus a devices.yaml given as text.
std::string load_error(const std::string& devices_yaml) {
  const fs::path dir = fs::temp_directory_path() / ("ninfer-arch-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(data_dir() / "arch" / "archs.yaml", dir / "archs.yaml");
  std::ofstream(dir / "devices.yaml") << devices_yaml;
  std::string msg;
  try {
    ArchCatalog::load(dir, data_dir() / "schemas");
  } catch (const Error& e) {
    msg = e.what();
  }
  fs::remove_all(dir);
  return msg;
}

} // namespace

TEST(ArchCatalog, MalformedYamlNamesFileAndLine) {
  const std::string m = load_error("devices:\n  - {name: A, arch: sm_89, sm_count: 80, memory_gib: 16\n  - x\n");
  EXPECT_NE(m.find("devices.yaml:"), std::string::npos) << m;
  EXPECT_NE(m.find("YAML syntax error"), std::string::npos) << m;
}

TEST(ArchCatalog, WrongTypeNamesLineAndKey) {
  const std::string m = load_error(
      "devices:\n"
      "  - {name: A, arch: sm_89, sm_count: 80, memory_gib: 16}\n"
      "  - name: B\n"
      "    arch: sm_89\n"
      "    sm_count: eighty\n"
      "    memory_gib: 16\n");
  EXPECT_NE(m.find("devices.yaml:5"), std::string::npos) << m;
  EXPECT_NE(m.find("devices[1].sm_count"), std::string::npos) << m;
  EXPECT_NE(m.find("eighty"), std::string::npos) << m;
}

TEST(ArchCatalog, UnknownKeyAndMissingKeyAreErrors) {
  EXPECT_NE(load_error("devices:\n  - {name: A, arch: sm_89, sm_count: 80, memory_gib: 16, sms: 3}\n").find("devices[0]"),
            std::string::npos);
  EXPECT_NE(load_error("devices:\n  - {name: A, arch: sm_89, memory_gib: 16}\n").find("devices.yaml:2"),
            std::string::npos);
}

TEST(ArchCatalog, DeviceOfUndefinedArchitectureIsAnError) {
  const std::string m = load_error("devices:\n  - {name: A, arch: sm_77, sm_count: 80, memory_gib: 16}\n");
  EXPECT_NE(m.find("arch 'sm_77' is not defined"), std::string::npos) << m;
}
