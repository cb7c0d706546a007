// doctest::Approx(v) accepts |x - v| < epsilon * (scale + max(|x|, |v|)) with scale 1: an
// absolute margin of about 1.2e-5 (or of `epsilon`), under which two small values always
// compare equal, whatever they are. Times in seconds of a synthetic trace (nanoseconds) are far
// below it. approx(v) keeps the relative margin only.
#pragma once

#include <doctest/doctest.h>

namespace prof::test {

inline doctest::Approx approx(double v) {
    return doctest::Approx(v).scale(0);
}

} // namespace prof::test
