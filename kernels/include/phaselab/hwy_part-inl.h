// SPDX-License-Identifier: Apache-2.0
// Per-target helpers for the partial vector at the end of an array: Load reads and Store writes
// only the first `valid` elements at p.
//   - AVX-512 (HWY_AVX3*), SVE/SVE2 and AVX2 for 4- and 8-byte lanes: one masked load (zeros in
//     the masked-off lanes) or masked store. These instructions do not access the masked-off
//     elements: no fault past the end of a mapping, no write to them (AVX-512 k-masked moves,
//     SVE predicated ld1/st1, AVX2 vmaskmov/vpmaskmov).
//   - Elsewhere (NEON, EMU128, AVX2 for 1- and 2-byte lanes), and in builds with an address or
//     memory sanitizer: a copy through a stack buffer. Highway 1.0.3's MaskedLoad and
//     BlendedStore read (and BlendedStore rewrites) the whole vector on those targets, which can
//     cross the end of the array; the sanitizers see the memcpy's extent (a wrong `valid` from a
//     caller is reported) but not a masked instruction's.
// Both paths give the same values. Include from a Highway per-target source, inside no namespace.
#if defined(PHASELAB_HWY_TAIL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef PHASELAB_HWY_TAIL_INL_H_
#undef PHASELAB_HWY_TAIL_INL_H_
#else
#define PHASELAB_HWY_TAIL_INL_H_
#endif

#include <hwy/highway.h>

#include <cstring>

// Set once: the sanitizers of GCC (__SANITIZE_ADDRESS__) and clang (HWY_IS_ASAN, HWY_IS_MSAN).
#ifndef PHASELAB_PART_SANITIZED
#if HWY_IS_ASAN || HWY_IS_MSAN || defined(__SANITIZE_ADDRESS__)
#define PHASELAB_PART_SANITIZED 1
#else
#define PHASELAB_PART_SANITIZED 0
#endif
#endif

// Per target: 1 where masked loads and stores of 4- and 8-byte lanes leave the masked-off
// elements untouched.
#undef PHASELAB_PART_MASKED
#if PHASELAB_PART_SANITIZED
#define PHASELAB_PART_MASKED 0
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL || \
    HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE_256 ||    \
    HWY_TARGET == HWY_SVE2_128
#define PHASELAB_PART_MASKED 1
#else
#define PHASELAB_PART_MASKED 0
#endif

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace part {
namespace hn = hwy::HWY_NAMESPACE;

// Whether Load/Store below use masked instructions for lanes of type T on this target.
template <typename T>
constexpr bool kMasked = PHASELAB_PART_MASKED && (sizeof(T) == 4 || sizeof(T) == 8);

// The first `valid` (< Lanes) elements at p, zeros after.
template <class D>
HWY_INLINE hn::Vec<D> Load(D d, const hn::TFromD<D>* p, size_t valid) {
  if constexpr (kMasked<hn::TFromD<D>>) {
    return hn::MaskedLoad(hn::FirstN(d, valid), d, p);
  } else {
    HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)] = {};
    std::memcpy(buf, p, valid * sizeof(hn::TFromD<D>));
    return hn::Load(d, buf);
  }
}

// Stores the first `valid` lanes of v at p; nothing after them is read or written.
template <class D>
HWY_INLINE void Store(D d, hn::Vec<D> v, hn::TFromD<D>* p, size_t valid) {
  if constexpr (kMasked<hn::TFromD<D>>) {
    hn::BlendedStore(v, hn::FirstN(d, valid), d, p);
  } else {
    HWY_ALIGN hn::TFromD<D> buf[HWY_MAX_BYTES / sizeof(hn::TFromD<D>)];
    hn::Store(v, d, buf);
    std::memcpy(p, buf, valid * sizeof(hn::TFromD<D>));
  }
}

}  // namespace part
}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#endif
