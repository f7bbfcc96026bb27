// The code generators by device (code_generator.h), each registered by its device backend at start-up.
#include <map>
#include <mutex>

#include "core/error.h"
#include "inductor/code_generator.h"

namespace kiln::inductor {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, const CodeGenerator*> backends;
};

Registry& registry() {
  static Registry* r = new Registry;  // backends register during static initialisation, in any order
  return *r;
}

}  // namespace

void register_code_generator(const std::string& device, const CodeGenerator* backend) {
  std::lock_guard lock(registry().mutex);
  registry().backends[device] = backend;
}

const CodeGenerator& code_generator_for(const std::string& device) {
  std::lock_guard lock(registry().mutex);
  auto it = registry().backends.find(device);
  if (it != registry().backends.end()) return *it->second;
  std::string known;
  for (const auto& [name, b] : registry().backends) known += (known.empty() ? "" : ", ") + name;
  fail("no inductor backend for device '{}' in this build (there are: {})", device, known);
}

}  // namespace kiln::inductor
