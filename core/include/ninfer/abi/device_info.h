/* A device as the planner and plugins see it: either discovered through the CUDA runtime or
 * described from arch/ data (a card we do not have). Plain C so it crosses the plugin ABI. */
#ifndef NINFER_ABI_DEVICE_INFO_H
#define NINFER_ABI_DEVICE_INFO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ninfer_device_kind {
  NINFER_DEVICE_CPU = 0,
  NINFER_DEVICE_CUDA = 1,
} ninfer_device_kind;

typedef struct ninfer_device_info {
  int32_t kind;         /* ninfer_device_kind */
  int32_t ordinal;      /* CUDA ordinal, -1 for a described device or the CPU */
  int32_t described;    /* 1: from the known-device table, not a live device */
  char name[128];
  char arch[16];        /* "sm_90", "sm_120a" ("a": arch-specific features present), "cpu" */
  int32_t cc_major;
  int32_t cc_minor;
  int32_t sm_count;
  int32_t regs_per_sm;
  int32_t regs_per_block;
  int32_t max_regs_per_thread;
  int64_t smem_per_sm;
  int64_t smem_per_block;
  int64_t smem_per_block_optin;
  int64_t reserved_smem_per_block;
  int32_t max_threads_per_sm;
  int32_t max_threads_per_block;
  int32_t max_blocks_per_sm;
  int32_t warp_size;
  int32_t cooperative_launch; /* device supports cooperative launches */
  int64_t l2_bytes;
  int64_t memory_bytes;
  double memory_bandwidth_gbs; /* datasheet figure for described devices; 0 when unknown */
} ninfer_device_info;

#ifdef __cplusplus
}
#endif

#endif
