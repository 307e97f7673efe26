// <stddef.h> for NVRTC: size_t and ptrdiff_t are NVRTC built-ins.
#pragma once
#ifndef NULL
#define NULL 0
#endif
