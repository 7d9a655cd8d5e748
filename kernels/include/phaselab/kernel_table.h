/* The kernel table handed to plugins: one function pointer per kernel of kernels.def, filled
 * with the variant that dispatch (or a forced target) selected. Plain C, part of the plugin ABI. */
#ifndef PHASELAB_KERNEL_TABLE_H
#define PHASELAB_KERNEL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pl_kernel_table {
  uint32_t struct_size; /* sizeof(pl_kernel_table) of the host; kernels are only appended */
  uint32_t num_kernels;
  const char* target; /* "avx512", "avx2", "scalar", ... */
#define PL_KERNEL(name, Camel, ret, params) ret(*name) params;
#include "phaselab/kernels.def"
#undef PL_KERNEL
  /* The selected variant's name per kernel, e.g. variant.exp = "exp.hwy.avx512". */
  struct {
#define PL_KERNEL(name, Camel, ret, params) const char* name;
#include "phaselab/kernels.def"
#undef PL_KERNEL
  } variant;
} pl_kernel_table;

#ifdef __cplusplus
}
#endif

#endif
