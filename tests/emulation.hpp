// SPDX-License-Identifier: Apache-2.0
// Whether the test suites run under an emulator. The aarch64 cross build runs its suites under
// qemu-aarch64 (the cross file's exe_wrapper); meson test sets PHASELAB_EMULATED=1 there (see
// tests/meson.build) and scripts/test-aarch64.sh sets it for the suites it starts itself.
// Emulated code runs 20-100x slower than hardware (and aarch64's 128-bit long double is
// software floating point on top), so the heaviest checks run at reduced sizes there, to keep
// the whole CI under 30 minutes on 2 cores. Every reduced check keeps its oracle and its
// tolerance is derived at the reduced size, so it can still fail; each place says what it
// reduces. Native runs (PHASELAB_EMULATED unset) keep the full sizes.
// Likewise the address/undefined sanitizer tree: meson test sets PHASELAB_SANITIZED=1 there
// (tests/meson.build, when b_sanitize is on); its code runs 3-20x slower, and a few checks whose
// claim needs a long run and adds nothing to what the sanitizers look for (memory errors, UB)
// run shorter there, each saying what it keeps.
#pragma once

#include <cstdlib>
#include <cstring>

namespace pl::test {

inline bool emulated() {
  const char* e = std::getenv("PHASELAB_EMULATED");
  return e != nullptr && std::strcmp(e, "1") == 0;
}

inline bool sanitized() {
  const char* e = std::getenv("PHASELAB_SANITIZED");
  return e != nullptr && std::strcmp(e, "1") == 0;
}

// `native` on hardware, `under_emulation` under an emulator.
template <class T>
inline T native_or_emulated(T native, T under_emulation) {
  return emulated() ? under_emulation : native;
}

}  // namespace pl::test
