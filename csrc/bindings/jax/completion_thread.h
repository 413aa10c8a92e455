// A thread that completes XLA FFI futures for the JAX handler.
//
// XLA continues a program on the thread that completes one of its futures: the rest
// of the jitted step would run on lockstep's background thread, inside the core's
// completion callback, and delay every other collective (measured: 1-2 ms per step).
// Completion callbacks therefore only copy results and post the completion here.
#pragma once

#include <functional>

namespace lockstep {
namespace jax {

// Runs `task` on the completion thread, after the tasks posted before it.
void PostCompletion(std::function<void()> task);

}  // namespace jax
}  // namespace lockstep
