// A manifest's text through the whole manifest path (YAML parse, limits, schema validation,
// the plain-language explanation, resolution into a Manifest), and the same YAML against the
// schemas of the other YAML files ninfer reads. Only ninfer::Error may come out.
#include <cstdint>

#include "fuzz_support.hpp"
#include "ninfer/support/error.hpp"
#include "ninfer/manifest/manifest.hpp"
#include "ninfer/support/yaml_schema.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ninfer;
  static const std::filesystem::path dir = [] {
    std::filesystem::create_directories(fuzz::scratch_dir() / "ck"); // `checkpoint: ck` resolves
    return fuzz::scratch_dir();
  }();
  static const std::filesystem::path schemas = fuzz::source_dir() / "schemas";
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    parse_manifest(text, dir / "m.yaml", schemas / "manifest.schema.json");
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fuzz::unexpected("manifest", e);
  }
  for (const char* schema : {"schedule.schema.json", "devices.schema.json", "archs.schema.json"}) {
    try {
      parse_validated_yaml(text, "fuzz.yaml", schemas / schema);
    } catch (const Error&) {
    } catch (const std::exception& e) {
      fuzz::unexpected(schema, e);
    }
  }
  return 0;
}
