#pragma once
// Device counters for kernels that coordinate their blocks through global
// atomics (the dynamic tile scheduler, the last-block step of the fused gate
// + mapping kernel).
namespace tilecraft::ops {

// A pair of unsigned counters on `device` that read 0; the kernel using it
// must leave both at 0 when it finishes. Each call hands out the next of 4096
// pairs on the device, so a pair is reused only 4096 launches later (long
// finished; the one hazard is 4096 such launches in flight at once). Graph
// capture records the pair, and each replay leaves it zeroed. The first call
// on a device allocates and zeroes the pairs synchronously, so it must not be
// the first such launch inside a CUDA-graph capture.
unsigned* launch_counter_pair(int device);

}  // namespace tilecraft::ops
