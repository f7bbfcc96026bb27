// The fuzzer's generator as a RapidCheck generator: every decision is one RapidCheck draw inside gen::exec, so
// shrinking a decision regenerates every later one (a smaller shape, a simpler op, fewer nodes) and the shrunk
// graph is still valid by construction. Header-only: the fuzz library does not link RapidCheck.
#pragma once
#include <rapidcheck.h>

#include <ostream>

#include "fuzz/generator.h"
#include "graph/text.h"

namespace kiln::fuzz {

class RapidCheckChoices : public Choices {
 public:
  uint64_t below(uint64_t n) override {
    if (n <= 1) return 0;
    return *rc::gen::resize(100, rc::gen::inRange<uint64_t>(0, n));
  }
};

inline rc::Gen<FuzzCase> fuzz_case_gen(GenOptions opts = {}) {
  return rc::gen::exec([opts] {
    RapidCheckChoices c;
    return generate(c, opts);
  });
}

inline void showValue(const FuzzCase& fc, std::ostream& os) {
  os << "inputs from seed " << fc.input_seed << "\n" << graph::print_graph(fc.graph);
}

}  // namespace kiln::fuzz
