// <stdint.h> for NVRTC (see cstdint in this folder).
#pragma once
#include <cuda/std/cstdint>
