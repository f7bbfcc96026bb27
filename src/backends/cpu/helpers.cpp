// Runtime helpers called from generated kernels (see helpers.h): the eager kernels' scalar rules
// (src/core/scalar_math.h); a zero integer divisor sets the status word instead of trapping.
#include "backends/cpu/helpers.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "core/scalar_math.h"
#include "backends/cpu/jit.h"

namespace {

void report(int32_t* status, int32_t code) {
  std::atomic_ref<int32_t>(*status).store(code, std::memory_order_relaxed);
}

}  // namespace

extern "C" {

int64_t kiln_rt_idiv_trunc(int64_t x, int64_t y, int32_t* status) {
  if (y == 0) return report(status, kiln::runtime::kStatusZeroDivision), 0;
  return kiln::int_div_trunc(x, y);
}

int64_t kiln_rt_idiv_floor(int64_t x, int64_t y, int32_t* status) {
  if (y == 0) return report(status, kiln::runtime::kStatusZeroDivision), 0;
  return kiln::int_div_floor(x, y);
}

int64_t kiln_rt_iremainder(int64_t x, int64_t y, int32_t* status) {
  if (y == 0) return report(status, kiln::runtime::kStatusZeroDivision), 0;
  return kiln::python_remainder(x, y);
}

int64_t kiln_rt_ipow(int64_t base, int64_t exponent, int32_t*) { return kiln::int_pow(base, exponent); }

float kiln_rt_div_floor_f32(float x, float y, int32_t*) { return kiln::float_div_floor(x, y); }
double kiln_rt_div_floor_f64(double x, double y, int32_t*) { return kiln::float_div_floor(x, y); }
float kiln_rt_remainder_f32(float x, float y, int32_t*) { return kiln::python_remainder(x, y); }
double kiln_rt_remainder_f64(double x, double y, int32_t*) { return kiln::python_remainder(x, y); }

}  // extern "C"

namespace kiln::runtime {

std::vector<std::pair<std::string, void*>> runtime_helpers() {
  return {
      {"kiln_rt_idiv_trunc", reinterpret_cast<void*>(&kiln_rt_idiv_trunc)},
      {"kiln_rt_idiv_floor", reinterpret_cast<void*>(&kiln_rt_idiv_floor)},
      {"kiln_rt_iremainder", reinterpret_cast<void*>(&kiln_rt_iremainder)},
      {"kiln_rt_ipow", reinterpret_cast<void*>(&kiln_rt_ipow)},
      {"kiln_rt_div_floor_f32", reinterpret_cast<void*>(&kiln_rt_div_floor_f32)},
      {"kiln_rt_div_floor_f64", reinterpret_cast<void*>(&kiln_rt_div_floor_f64)},
      {"kiln_rt_remainder_f32", reinterpret_cast<void*>(&kiln_rt_remainder_f32)},
      {"kiln_rt_remainder_f64", reinterpret_cast<void*>(&kiln_rt_remainder_f64)},
  };
}

}  // namespace kiln::runtime
