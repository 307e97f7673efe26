// <cuda_runtime.h> for NVRTC: the device-side names (threadIdx, __syncthreads, dim3, ...) are
// NVRTC built-ins and host API declarations have no place in a device-only compile; what nvcc's
// header brings in besides (the math constants) is given here.
#pragma once
#include "cmath"
