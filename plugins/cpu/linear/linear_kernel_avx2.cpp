// The linear kernel built with AVX2 + FMA (x86-64 only; chosen at run time when the CPU has
// both, see linear/linear.cpp).
#include <type_traits>
#define LINEAR_KERNEL_ENTRY linear_kernel_avx2
#include "linear/linear_kernel.inc"
