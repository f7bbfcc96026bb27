// The status word every generated kernel reports through, whatever the backend (one per run; 0 = ok).
#pragma once
#include <cstdint>

namespace kiln::inductor {

// Codes from kStatusInjectedBase up name the KILN_INJECT entry whose runtime_error fired (base + its index).
enum KernelStatus : int32_t { kStatusOk = 0, kStatusZeroDivision = 2, kStatusInjectedBase = 16 };

}  // namespace kiln::inductor
