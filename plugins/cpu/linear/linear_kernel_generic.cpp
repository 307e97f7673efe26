// The linear kernel for any CPU (the compiler's baseline instruction set).
#include <type_traits>
#define LINEAR_KERNEL_ENTRY linear_kernel_generic
#include "linear/linear_kernel.inc"
