// The LinearObserver of a calibration pass: for each input of the pass, H += Σ x xᵀ over every
// row the runtime feeds its modules (float64, upper triangle while accumulating).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ninfer/quantize/hessian_inputs.hpp"
#include "ninfer/models/linear_observer.hpp"
#include "ninfer/quantize/hessian.hpp"

namespace ninfer::quantize_detail {

class HessianCollector final : public LinearObserver {
 public:
  // Allocates (zeroed) the Hessians of `pass`'s inputs.
  HessianCollector(const std::vector<HessianInput>& inputs, const QuantizePlan& plan, const CalibrationPass& pass);

  bool wants(std::span<const std::string> modules) override;
  void observe(const LinearInput& input) override;

  // Input `pass.inputs[i]`'s Hessian, symmetric (the accumulator is handed over and emptied), and
  // the rows it was accumulated from.
  std::vector<double> take(size_t i);
  int64_t rows(size_t i) const { return h_[i].rows(); }
  double seconds_accumulating() const { return seconds_; }

 private:
  const std::vector<HessianInput>& inputs_;
  const CalibrationPass& pass_;
  std::map<std::string, size_t, std::less<>> slot_of_; // module name -> index into pass_.inputs
  std::vector<HessianSum> h_;
  double seconds_ = 0;
};

} // namespace ninfer::quantize_detail
