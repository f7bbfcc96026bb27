// Runtime helpers that generated kernels call for the rare cases whose exact eager semantics are not worth
// open-coding in LLVM IR (integer division and remainder with their zero checks, integer powers, Python-style
// float floor division and remainder). Each takes the kernel's status word last and sets it on an error.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

extern "C" {
int64_t kiln_rt_idiv_trunc(int64_t x, int64_t y, int32_t* status);
int64_t kiln_rt_idiv_floor(int64_t x, int64_t y, int32_t* status);
int64_t kiln_rt_iremainder(int64_t x, int64_t y, int32_t* status);
int64_t kiln_rt_ipow(int64_t base, int64_t exponent, int32_t* status);
float kiln_rt_div_floor_f32(float x, float y, int32_t* status);
double kiln_rt_div_floor_f64(double x, double y, int32_t* status);
float kiln_rt_remainder_f32(float x, float y, int32_t* status);
double kiln_rt_remainder_f64(double x, double y, int32_t* status);
}

namespace kiln::runtime {
// (name, address) of every helper, for the JIT's symbol table.
std::vector<std::pair<std::string, void*>> runtime_helpers();
}  // namespace kiln::runtime
