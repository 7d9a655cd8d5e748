// SPDX-License-Identifier: Apache-2.0
// `phaselab status OUT [--json]`: where a run folder, or a folder of shards, stands: per part its
// status, lock (held by a live phaselab, or stale), points done / failed / left (journal.csv and
// failures.csv are current while a run goes on), the point seconds recorded so far and an
// estimate of what is left, missing shards, and the commands that finish the run (the --resume
// of each unfinished shard, the same as an `sbatch --array=` list, and the merge).
#pragma once

#include <string>

namespace pl::driver {

int execute_status(const std::string& out, bool as_json);

}  // namespace pl::driver
