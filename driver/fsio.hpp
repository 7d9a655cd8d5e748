// SPDX-License-Identifier: Apache-2.0
// Checked file writes for the run folder. Every byte phaselab writes into a run folder goes
// through write_all(), so a full disk, a quota or an I/O error is never silent: callers get the
// errno and name the path. A test hook makes the failure reproducible without a small disk:
//
//   PHASELAB_FAULT_WRITE_BYTES=N   writes fail with ENOSPC once N bytes in total were written
//                                  by this process (the write that crosses N is cut short, as
//                                  a full disk would). Unset: no injection.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace pl::driver {

// Writes all n bytes to fd (retrying short writes and EINTR). On failure returns false with
// errno in *err; some bytes may have been written.
bool write_all(int fd, const void* data, size_t n, int* err);

// "No space left on device (ENOSPC)".
std::string errno_text(int err);

// Writes `text` to `path` durably: a temporary file beside it, fsync, rename, fsync of the
// folder. On failure the old file is untouched and the temporary removed; *error says what
// failed (the errno text).
bool write_file_durable(const std::string& path, const std::string& text, std::string* error);

// Replaces `path` in place (truncate, write, fsync): needs no second copy's space, so it works
// on a full disk when the new text is not longer than the old. Used only as a last resort.
bool overwrite_in_place(const std::string& path, const std::string& text, std::string* error);

// Test hook: space freed by phaselab (its reserve file) returns to the injected budget, as it
// would on a real disk. No effect without PHASELAB_FAULT_WRITE_BYTES.
void fault_credit(size_t bytes);
// Test hook: space taken without write() (fallocate) counts against the injected budget; false
// when the budget has not that much left.
bool fault_take(size_t bytes);

// fdatasync(fd); with PHASELAB_FAULT_SYNC_MS=N (a test hook) each call takes N ms longer, as on
// a slow or network disk, so tests can see how finished points are grouped into one write.
int data_sync(int fd);

// fsyncs a folder (after creating or renaming a file in it).
void sync_dir(const std::string& dir);

}  // namespace pl::driver
