// SPDX-License-Identifier: Apache-2.0
/* phaselab plugin ABI (plain C; no C++ types or exceptions cross this boundary).
 *
 * A plugin is a shared library exporting one symbol, PL_PLUGIN_ENTRY ("phaselab_plugin_entry"),
 * a const pl_plugin whose first field is the ABI version. The driver reads that field before
 * anything else and refuses a mismatch (exit 3). Everything else is reached through the struct:
 * declarations (parameters, result tables, plots) and the create/run/destroy life cycle of one
 * sweep point. Allocation belongs in create(); run() is the hot loop and must not allocate per
 * step.
 *
 * Growth: new fields go at the end and the host checks struct_size; reserved slots are zero.
 * Kernels are appended to the kernel table (kernels.def order); the SDK checks the host's table is
 * at least as long as the one the plugin was compiled with. A change that moves an existing field
 * raises PL_PLUGIN_ABI_VERSION, and the driver refuses plugins built for another version. */
#ifndef PHASELAB_PLUGIN_H
#define PHASELAB_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "phaselab/kernel_table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Version history: 1, the first; 2, the kernel table's variant names moved behind a pointer
 * (pl_kernel_table::variant), so that appending a kernel no longer moves them. */
#define PL_PLUGIN_ABI_VERSION 2u
#define PL_PLUGIN_ENTRY phaselab_plugin_entry
#define PL_PLUGIN_ENTRY_NAME "phaselab_plugin_entry"

#if defined(_WIN32)
#define PL_EXPORT __declspec(dllexport)
#else
#define PL_EXPORT __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------ parameters */
typedef enum pl_param_type {
  PL_PARAM_INT = 1,   /* int64 */
  PL_PARAM_FLOAT = 2, /* double */
  PL_PARAM_BOOL = 3,
  PL_PARAM_STRING = 4,
  PL_PARAM_ENUM = 5 /* one of `choices` ("softmax|linear"); value has the string and its index */
} pl_param_type;

enum {
  PL_RANGE_MIN = 1u << 0,           /* value >= min */
  PL_RANGE_MAX = 1u << 1,           /* value <= max */
  PL_RANGE_MIN_EXCLUSIVE = 1u << 2, /* value > min */
  PL_RANGE_MAX_EXCLUSIVE = 1u << 3  /* value < max */
};

typedef struct pl_param_decl {
  const char* name; /* config key, [A-Za-z][A-Za-z0-9_]* */
  pl_param_type type;
  const char* help; /* one line */
  /* default value: int and bool use def_int, float def_float, string and enum def_string */
  int64_t def_int;
  double def_float;
  const char* def_string;
  uint32_t range_flags; /* PL_RANGE_* for int and float */
  double min, max;
  const char* choices; /* enum only: "a|b|c" */
  const void* reserved[4];
} pl_param_decl;

typedef struct pl_value {
  pl_param_type type;
  int64_t i;     /* int, bool (0/1), enum index */
  double f;      /* float (ints are also given here, converted) */
  const char* s; /* string and enum (the choice), else NULL */
} pl_value;

/* ------------------------------------------------------------------ results */
/* A result table: results.csv is table 0; others become <name>.csv beside it (side files such as
 * the circulant spectrum or a loss history). The driver prepends the point's sweep keys and seed
 * to every row, so plugins emit only their measured columns, in declared order. */
enum {
  /* After the sweep keys and seed, also every parameter that is not swept (declaration order,
   * the run's value): each row names its whole point, for a finish() hook or a reader that needs
   * more than the swept keys. No column of the table may be named like a parameter. */
  PL_TABLE_ALL_PARAMS = 1u << 0
};

typedef struct pl_table_decl {
  const char* name; /* "results" for table 0 */
  const char* const* columns;
  uint32_t num_columns;
  uintptr_t flags; /* PL_TABLE_*; was reserved[0], zero in older plugins */
  const void* reserved[1];
} pl_table_decl;

typedef enum pl_cell_kind {
  PL_CELL_EMPTY = 0,
  PL_CELL_NUM = 1,
  PL_CELL_INT = 2,
  PL_CELL_STR = 3
} pl_cell_kind;

typedef struct pl_cell {
  pl_cell_kind kind;
  double num;
  int64_t i;
  const char* str; /* copied by the host during emit */
} pl_cell;

/* ------------------------------------------------------------------ figures */
enum {
  PL_PLOT_LOGX = 1u << 0,
  PL_PLOT_LOGY = 1u << 1,
  PL_PLOT_POINTS = 1u << 2,   /* markers only (default: lines with markers) */
  PL_PLOT_HISTOGRAM = 1u << 3 /* y is ignored; histogram of x per group */
};

/* Optional presentation of a plot, reached through pl_plot_decl.style (NULL: the defaults, as
 * drawn by plugins built before it existed). Grows at the end: the host reads only the first
 * struct_size bytes and takes every later field as zero. Strings may be NULL or "" for "none". */
typedef enum pl_plot_kind {
  PL_PLOT_KIND_XY = 0,     /* curves or points of y against x (PL_PLOT_* flags) */
  PL_PLOT_KIND_HEATMAP = 1 /* one coloured cell per distinct (x, y), coloured by column z */
} pl_plot_kind;

typedef struct pl_plot_style {
  uint32_t struct_size; /* sizeof(pl_plot_style) as compiled into the plugin */
  uint32_t kind;        /* pl_plot_kind */
  /* One small panel per distinct value of this column (numeric values in increasing order),
   * all panels on the same axes ranges, the legend in a panel of its own. */
  const char* facet_by;
  uint32_t facet_columns; /* panels per row; 0: about square */
  uint32_t reserved_u32;
  /* Categorical axes: "a|b|c" lists the axis' values in order; a cell equal to one of them (as
   * text, or as its 0-based position when the cell is a number) sits at that position, ticks
   * are labelled by name, other rows are dropped (and counted in the plot's note). For a heat
   * map, z_categories colours the cells by category (the most frequent one over seeds). */
  const char* x_categories;
  const char* y_categories;
  const char* z; /* heat map: the column that colours the cells (mean over rows, or category) */
  const char* z_categories;
  const char* xlabel; /* axis titles (default: the column names) */
  const char* ylabel;
  /* x tick labels from a text column of the same table: each x drawn is labelled by that
   * column's cell in its rows (circuits: x = edge_index, labelled E->A1.q, E->A1.k, ...). A
   * name not in the table leaves the numbers. Was reserved[0]: zero in older plugins. */
  const char* xtic_column;
  /* Reference curves: "REF=DATA,REF2=DATA2" draws each y column REF (a theory, a Bayes floor)
   * as a dashed line without markers (the mean per x) in the colour of DATA's curve of the same
   * group. Was reserved[1]: zero in older plugins. */
  const char* y_references;
  const void* reserved[2];
} pl_plot_style;

/* One figure, figures/<name>.png: columns of `table` plotted against each other, one curve per
 * distinct value of the `group_by` columns (comma-separated), rows restricted by `filter`
 * ("col=value,col2=value2", empty for all). y may list several columns separated by commas.
 * Rows sharing x within a curve (e.g. seeds) are drawn as mean +- standard error. */
typedef struct pl_plot_decl {
  const char* name;
  const char* title;
  const char* table;
  const char* x;
  const char* y;
  const char* group_by;
  const char* filter;
  uint32_t flags;             /* PL_PLOT_* */
  const pl_plot_style* style; /* optional (NULL); was reserved[0], zero in older plugins */
  const void* reserved[1];
} pl_plot_decl;

/* ------------------------------------------------------------------ host interface */
typedef enum pl_status {
  PL_OK = 0,
  PL_FAILED = 1,   /* this point failed (e.g. NaN); reason given with host->fail(); others go on */
  PL_CANCELLED = 2 /* host->cancelled() said stop */
} pl_status;

typedef enum pl_log_level {
  PL_LOG_DEBUG = 0,
  PL_LOG_INFO = 1,
  PL_LOG_WARN = 2,
  PL_LOG_ERROR = 3
} pl_log_level;

/* One sweep point x seed. params[] follows the plugin's declaration order, fully resolved
 * (sweep value, else the plugin table's value, else the default) and validated. */
typedef struct pl_point {
  uint64_t index; /* position in the run's point order */
  uint64_t seed;
  uint64_t point_key; /* hash of the parameter values that differ from their defaults (seed
                         excluded): stable across runs, orders, and plugin versions that add keys */
  const pl_value* params;
  uint32_t num_params;
  const void* reserved[4];
} pl_point;

typedef struct pl_host {
  uint32_t struct_size;
  uint32_t abi_version;
  const pl_kernel_table* kernels; /* selected (or forced) kernel variants */
  void* ctx;                      /* opaque, pass back to every call */
  /* Appends one row (cells in declared column order) to table `table`; returns 0 on success. */
  int (*emit)(void* ctx, uint32_t table, const pl_cell* cells, uint32_t num_cells);
  /* Fraction of this point done, 0..1; cheap, call it as often as convenient. */
  void (*progress)(void* ctx, double fraction);
  /* Non-zero once the user asked to stop (Ctrl-C): return PL_CANCELLED soon. */
  int (*cancelled)(void* ctx);
  void (*log)(void* ctx, pl_log_level level, const char* message);
  /* Records why this point failed; then return PL_FAILED from run(). */
  void (*fail)(void* ctx, const char* reason);
  /* The run's output folder (for extra artefacts); read-only string. */
  const char* out_dir;
  int32_t threads; /* threads the run uses (plugins run one point per thread) */
  const void* reserved[8];
} pl_host;

/* ------------------------------------------------------------------ the entry */
typedef struct pl_plugin {
  uint32_t abi_version; /* PL_PLUGIN_ABI_VERSION: checked first */
  uint32_t struct_size; /* sizeof(pl_plugin) as compiled into the plugin */
  const char* name;     /* matches the config's plugin = "..." and its [name] table */
  const char* version;
  const char* description; /* one line */

  const pl_param_decl* params;
  uint32_t num_params;
  const pl_table_decl* tables; /* tables[0] is results.csv */
  uint32_t num_tables;
  const pl_plot_decl* plots;
  uint32_t num_plots;

  /* Optional cross-parameter check for one resolved point; returns 0 if fine, else writes a
   * message naming the key(s) into err and returns non-zero (the run does not start: exit 2). */
  int (*validate)(const pl_value* params, uint32_t num_params, char* err, size_t err_len);
  /* Allocates everything the point needs. May return PL_FAILED with host->fail(). */
  pl_status (*create)(const pl_host* host, const pl_point* point, void** state);
  /* Runs the point: train/sample/evaluate, emit rows. */
  pl_status (*run)(void* state, const pl_host* host, const pl_point* point);
  void (*destroy)(void* state);
  /* Optional: after all points, with the run folder complete (results files closed);
   * e.g. a summary across points. May be NULL. */
  pl_status (*finish)(const pl_host* host, const char* run_dir);

  const void* reserved[8];
} pl_plugin;

/* Optional second export, looked up by name: an estimate of the memory (bytes) one point with
 * these resolved params needs while it runs. The driver refuses, before any work, a run whose
 * points running at once would need more than 80% of the machine's memory (unless --force).
 * Plugins without it are not checked. */
typedef uint64_t (*pl_point_bytes_fn)(const pl_value* params, uint32_t num_params);
#define PL_POINT_BYTES_SYMBOL "phaselab_plugin_point_bytes"

/* Optional third export, looked up by name: a relative cost estimate of one point with these
 * resolved params (any unit, e.g. its FLOP count; only ratios between points matter). `run
 * --shard I/N` deals the points to shards by it, largest first to the least-loaded shard, so
 * each shard gets about the same work. It must depend on the params only (every shard and
 * `merge` recompute the same assignment). Plugins without it are balanced by count. */
typedef double (*pl_point_cost_fn)(const pl_value* params, uint32_t num_params);
#define PL_POINT_COST_SYMBOL "phaselab_plugin_point_cost"

#ifdef __cplusplus
}
#endif

#endif /* PHASELAB_PLUGIN_H */
