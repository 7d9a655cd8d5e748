// SPDX-License-Identifier: Apache-2.0
/* A shared library named like a plugin that does not export phaselab_plugin_entry. */
int phaselab_not_the_entry(void) { return 42; }
