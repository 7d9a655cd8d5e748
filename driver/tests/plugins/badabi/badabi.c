// SPDX-License-Identifier: Apache-2.0
/* A plugin built for ABI version 1 (before the kernel table's variant names moved behind a
 * pointer): the driver must refuse it before reading further, saying what to do. */
#include "phaselab_plugin.h"

PL_EXPORT const pl_plugin PL_PLUGIN_ENTRY = {
    1u, sizeof(pl_plugin), "badabi", "0", "wrong ABI version", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    {0}};
