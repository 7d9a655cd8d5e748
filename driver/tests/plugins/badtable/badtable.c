// SPDX-License-Identifier: Apache-2.0
/* A plugin whose all-parameters table (PL_TABLE_ALL_PARAMS) has a column named like one of its
 * parameters: the driver must refuse it at load, naming the table and the parameter. */
#include "phaselab_plugin.h"

static const pl_param_decl kParams[] = {
    {"n", PL_PARAM_INT, "a size", 4, 4.0, 0, 0u, 0, 0, 0, {0}},
};
static const char* const kResults[] = {"value"};
static const char* const kPoints[] = {"value", "n"};
static const pl_table_decl kTables[] = {
    {"results", kResults, 1u, 0u, {0}},
    {"points", kPoints, 2u, PL_TABLE_ALL_PARAMS, {0}},
};

PL_EXPORT const pl_plugin PL_PLUGIN_ENTRY = {PL_PLUGIN_ABI_VERSION,
                                             sizeof(pl_plugin),
                                             "badtable",
                                             "0",
                                             "a column named like a parameter",
                                             kParams,
                                             1u,
                                             kTables,
                                             2u,
                                             0,
                                             0u,
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             {0}};
