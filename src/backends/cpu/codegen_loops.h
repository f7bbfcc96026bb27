// Loops for the CPU code generator (codegen_loops.cpp).
#pragma once
#include <cstdint>
#include <functional>

#include "backends/cpu/codegen_context.h"

namespace kiln::inductor::cpu_codegen {

// for (iv = lo; iv < hi; iv += step) body(iv). `hints` (optional): loop metadata for the vectoriser.
void emit_loop(KernelContext& cx, Value* lo, Value* hi, const std::function<void(Value*)>& body,
               llvm::MDNode* hints = nullptr, int64_t step = 1);

// Loops over each non-constant variable of vars[from, until) (extents in `sizes`), binding it in `scope`, then
// calls `body`; `parallel` (-1: none) runs [begin, end). `innermost_hints` go on the innermost loop.
void emit_nest(KernelContext& cx, EmitScope& scope, const std::vector<Index>& vars, const Shape& sizes, size_t from,
               int parallel, const std::function<void()>& body, size_t until = SIZE_MAX,
               llvm::MDNode* innermost_hints = nullptr);

// Loop metadata forcing an interleave count: a reduction's vector loop then keeps `count` independent
// accumulators, so it runs at the adder's throughput instead of its latency.
llvm::MDNode* interleave_hint(KernelContext& cx, int count);

}  // namespace kiln::inductor::cpu_codegen
