// kiln::disable and kiln::print: code that runs eagerly on every call of a compiled function (see capture.h).
#include <cstdio>

#include "capture/capture.h"

namespace kiln {

std::vector<Tensor> disable(std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn,
                            const std::vector<Tensor>& inputs, std::source_location where) {
  capture::Recorder* r = capture::Recorder::current();
  if (!r) return fn(inputs);
  return r->eager_region(capture::BreakKind::Disable, "kiln::disable region (runs eagerly on every call)",
                         capture::SourceSite::from(where), std::move(fn), inputs);
}

void disable(std::function<void()> fn, std::source_location where) {
  disable([fn = std::move(fn)](const std::vector<Tensor>&) { fn(); return std::vector<Tensor>{}; }, {}, where);
}

namespace {
void print_line(const std::string& line) {
  std::string text = line + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}
}  // namespace

void print(const std::string& text, std::source_location where) {
  auto run = [text](const std::vector<Tensor>&) {
    print_line(text);
    return std::vector<Tensor>{};
  };
  capture::Recorder* r = capture::Recorder::current();
  if (!r) return void(run({}));
  r->eager_region(capture::BreakKind::Print, "kiln::print (printed on every call)", capture::SourceSite::from(where),
                  run, {});
}

void print(const std::string& label, const Tensor& t, std::source_location where) {
  auto run = [label](const std::vector<Tensor>& in) {
    print_line(label + ": " + format_tensor(in.at(0)));
    return std::vector<Tensor>{};
  };
  capture::Recorder* r = capture::Recorder::current();
  if (!r) return void(run({t}));
  r->eager_region(capture::BreakKind::Print, "kiln::print (printed on every call)", capture::SourceSite::from(where),
                  run, {t});
}

}  // namespace kiln
