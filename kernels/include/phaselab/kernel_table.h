// SPDX-License-Identifier: Apache-2.0
/* The kernel table handed to plugins: one function pointer per kernel of kernels.def, filled
 * with the variant that dispatch (or a forced target) selected. Plain C, part of the plugin ABI. */
#ifndef PHASELAB_KERNEL_TABLE_H
#define PHASELAB_KERNEL_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The selected variant's name per kernel, e.g. names->exp = "exp.hwy.avx512". */
typedef struct pl_kernel_names {
#define PL_KERNEL(name, Camel, ret, params) const char* name;
#include "phaselab/kernels.def"
#undef PL_KERNEL
} pl_kernel_names;

/* Layout (plugin ABI version 2): the fixed header, then one function pointer per kernel in
 * kernels.def order. Kernels are only appended, so a plugin built against an older (shorter) table
 * still finds every kernel it knows at the same offset; struct_size tells it how many the host
 * has (the SDK refuses to run when the host's table is shorter than the plugin's). The variant
 * names sit behind a pointer for the same reason: inline after the function pointers (ABI 1),
 * appending a kernel moved them. */
typedef struct pl_kernel_table {
  uint32_t struct_size; /* sizeof(pl_kernel_table) of the host */
  uint32_t num_kernels;
  const char* target;             /* "avx512", "avx2", "scalar", ... */
  const pl_kernel_names* variant; /* never NULL; a name is NULL where no variant was selected */
#define PL_KERNEL(name, Camel, ret, params) ret(*name) params;
#include "phaselab/kernels.def"
#undef PL_KERNEL
} pl_kernel_table;

#ifdef __cplusplus
}
#endif

#endif
