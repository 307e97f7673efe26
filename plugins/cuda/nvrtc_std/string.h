// <string.h> for NVRTC: memcpy is a device built-in.
#pragma once
