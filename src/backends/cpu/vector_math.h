// kiln's own vector math for AVX-512 hosts, defined into each kernel module. e^x on f32 is the one function of
// softmax, sigmoid and SiLU, and glibc's libmvec version (_ZGVeN16v_expf) costs about twice the arithmetic of
// a short polynomial with the exponent applied by vscalefps (0.54-0.61 against 0.27 ns per element per core on
// the development machine's Ice Lake). The generated code calls a scalar function whose calls carry a
// vector-function-abi-variant attribute naming 8- and 16-lane versions: the loop vectoriser widens the calls
// to them, and after the O2 pipeline they are inlined, so the backend keeps the loop's constants in registers
// (a libmvec call clobbers every vector register). Scalar remainders compute exactly the same polynomial: a
// result does not depend on where its element falls in the loop.
//
// libm functions (sin, tan, log, tanh, pow, ...) compute through glibc's libmvec on every path: one vector variant
// per function (the host's widest), which the vectorised loop body calls, and which the scalar remainder and every
// narrower vector call also run, on a zero-padded vector. libm's scalar tanf and libmvec's differ by an ulp on some
// inputs, so a loop whose body and remainder called different ones gave equal inputs unequal results depending on
// where they fell (fuzz/findings/README.md, finding 7): a result now depends only on its inputs.
#pragma once

#include <llvm/ADT/ArrayRef.h>

#include <optional>
#include <string>

namespace llvm {
class IRBuilderBase;
class Module;
class Value;
}  // namespace llvm

namespace kiln::runtime {

// Whether the host has what the functions below use (AVX-512F and VL: vscalefps on 8 and 16 lanes).
bool has_fast_vector_math();

// e^x of an f32 `x` through kiln_expf (defined in `m` on first use): at most 2 ulp from the correctly rounded
// result (1.92 at worst over every 7th f32 in [-110, 90], measured once in C; tests/test_inductor.cpp checks
// 100k points and the edge values); +-inf, NaN, overflow to inf and underflow through the subnormals to 0 as
// expf. Only where has_fast_vector_math().
llvm::Value* emit_fast_expf(llvm::IRBuilderBase& b, llvm::Module& m, llvm::Value* x);

// After the O2 pipeline: inlines kiln's vector-math functions (scalar and vector) into their callers and
// deletes them, so the object defines only the kernel. Each inlined site costs code generation time: the code
// generator uses these functions only in kernels with few exps (codegen_context.h kMaxFastExpSites). A no-op
// on modules that do not use them.
// Also inlines the libmvec wrappers of emit_libm_call.
void inline_vector_math(llvm::Module& m);

// The one libmvec function kernels compute libm's `base` ("tan", "pow", ...; in f32 or f64; `arity` arguments) with on this
// host: glibc's AVX-512 variant where the host has AVX-512F, else the AVX2 one, else the SSE one; nullopt where
// libmvec is not loaded or lacks the function (calls then stay scalar libm calls, never vectorised).
struct LibmvecVariant {
  std::string name;  // e.g. "_ZGVeN16v_tanf"
  unsigned lanes = 0;
};
std::optional<LibmvecVariant> libmvec_variant(const std::string& base, bool f32, int arity);
// How many libm functions have a libmvec variant here (part of the kernel cache key: the code calls them).
int libmvec_variant_count();

// `base`(args...) ("exp", "tan", "pow"; "expf" for f32 args) for args of one type, f32 or f64: a call of
// kiln_vm_<name>, whose vector-function-abi-variant attribute names 2- to N-lane versions; every version, the
// scalar one included, pads its lanes with zeros to the N lanes of libmvec_variant and calls it, so a result
// does not depend on where its element falls in a loop (vectorised body, scalar remainder, an unvectorised loop).
// A plain libm call, pure and non-throwing, where the function has no variant.
llvm::Value* emit_libm_call(llvm::IRBuilderBase& b, llvm::Module& m, const std::string& base,
                            llvm::ArrayRef<llvm::Value*> args);

// NaN-skipping max: marks `m` as a module whose vector llvm.maximum calls may skip NaN (every one comes from a max
// reduction whose NaNs need not reach its result; codegen_context.h max_skips_nan decides when). After the O2
// pipeline, lower_max_skipping_nan replaces each such vector call with the host's max instruction (vmaxps/vmaxpd:
// the larger operand, the second when either is NaN, +-0 in either order), so a reduction over values holding a NaN
// ends with NaN or with one of its other values, which is what NaN-insensitive allows: one instruction where
// llvm.maximum's NaN and signed-zero rules cost five. Returns how many calls it replaced; a no-op on unmarked
// modules. Only where has_fast_vector_math().
void mark_max_skipping_nan(llvm::Module& m);
int lower_max_skipping_nan(llvm::Module& m);

}  // namespace kiln::runtime
