// SPDX-License-Identifier: Apache-2.0
// Per-target helpers for the partial vector at the end of an array. Highway 1.0.3's MaskedLoad
// and BlendedStore read (and BlendedStore rewrites) the whole vector on NEON and EMU128, which
// can cross the end of the array; these go through a stack buffer instead and touch only the
// first `valid` elements. Include from a Highway per-target source, inside no namespace.
#if defined(PHASELAB_HWY_TAIL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASELAB_HWY_TAIL_INL_H_
#undef PHASELAB_HWY_TAIL_INL_H_
#else
#define PHASELAB_HWY_TAIL_INL_H_
#endif

#include <hwy/highway.h>

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace part {
namespace hn = hwy::HWY_NAMESPACE;

// The first `valid` (< Lanes) elements at p, zeros after.
template <class D>
HWY_INLINE hn::Vec<D> Load(D d, const hn::TFromD<D>* p, size_t valid) {
  HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)] = {};
  std::memcpy(buf, p, valid * sizeof(hn::TFromD<D>));
  return hn::Load(d, buf);
}

// Stores the first `valid` lanes of v at p; nothing after them is read or written.
template <class D>
HWY_INLINE void Store(D d, hn::Vec<D> v, hn::TFromD<D>* p, size_t valid) {
  HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, valid * sizeof(hn::TFromD<D>));
}

}  // namespace part
}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif
