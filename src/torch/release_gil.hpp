// Releases the GIL for a scope when the calling thread holds it, as a call from Python does: a
// thread that waits there for the communication thread must not hold what that thread may need (a
// completion callback written in Python takes the GIL).
#pragma once

#include <Python.h>

namespace mcr::torch_ext {

class ReleaseGilIfHeld {
 public:
  ReleaseGilIfHeld()
      : saved_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~ReleaseGilIfHeld() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  ReleaseGilIfHeld(const ReleaseGilIfHeld&) = delete;
  ReleaseGilIfHeld& operator=(const ReleaseGilIfHeld&) = delete;

 private:
  PyThreadState* saved_;
};

}  // namespace mcr::torch_ext
