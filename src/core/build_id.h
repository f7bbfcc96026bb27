// The identity of the running kiln code: the GNU build ID the linker stamped on the binary (or shared library)
// holding it. The kernel disk cache keys every entry by it, because a kernel's key names only its loop IR: two
// builds whose code generators differ (a developer's branch, a bisected commit, a fixed codegen bug not yet
// counted in kCodegenVersion) would otherwise load each other's objects and run the wrong machine code.
#pragma once
#include <string>

namespace kiln {

// Hex digits of the build ID, or "git <hash> built <date time>" where the binary carries none (a linker without
// --build-id): still one value per build of a commit, coarser than the build ID.
const std::string& build_identity();

}  // namespace kiln
