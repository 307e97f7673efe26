#include "hf_oracle.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "test_support.hpp"

namespace ninfer::test {

std::vector<OracleCase> run_hf_oracle(const std::filesystem::path& tokenizer_json,
                                      const std::vector<std::string>& texts) {
  namespace fs = std::filesystem;
  const fs::path script = source_dir() / "tests/tokenizer/hf_oracle.mjs";
  if (!fs::exists(source_dir() / "node_modules/@huggingface/tokenizers/package.json"))
    throw std::runtime_error("the reference tokenizer @huggingface/tokenizers is not installed; run "
                             "scripts/setup-npm.sh in the repository root");
  const fs::path dir = build_dir() / "tests" / ("hf_oracle." + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path in = dir / "texts.json", out = dir / "out.json";
  std::ofstream(in) << nlohmann::json(texts).dump();

  const std::string command = "node '" + script.string() + "' '" + tokenizer_json.string() + "' '" + in.string() +
                              "' '" + out.string() + "'";
  const int status = std::system(command.c_str());
  if (status != 0)
    throw std::runtime_error("the reference tokenizer failed (exit status " + std::to_string(status) + ") running: " +
                             command + "\n(is node installed? Debian: apt-get install -y nodejs)");

  std::ifstream result(out);
  const auto json = nlohmann::json::parse(result);
  std::vector<OracleCase> cases;
  for (const auto& c : json.at("cases"))
    cases.push_back({c.at("text").get<std::string>(), c.at("ids").get<std::vector<int32_t>>(),
                     c.at("decoded").get<std::string>()});
  fs::remove_all(dir);
  return cases;
}

} // namespace ninfer::test
