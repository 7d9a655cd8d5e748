/* A plugin built for another ABI version: the driver must refuse it before reading further. */
#include "phaselab_plugin.h"

PL_EXPORT const pl_plugin PL_PLUGIN_ENTRY = {PL_PLUGIN_ABI_VERSION + 41u,
                                             sizeof(pl_plugin),
                                             "badabi",
                                             "0",
                                             "wrong ABI version",
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             0,
                                             {0}};
