#pragma once
// TC_FMA_CLONES marks a host function to be compiled twice on x86-64, with FMA
// instructions and plain, the loader choosing by the CPU. Without -mfma each
// std::fma is a call into libm: most of the time of a large golden or input
// generation. Use it only in files compiled with -ffp-contract=off
// (CMakeLists.txt): there no product and sum written apart is fused, so both
// builds round exactly alike and the bits do not depend on the CPU.
#if defined(__x86_64__) && defined(__GNUC__)
#define TC_FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define TC_FMA_CLONES
#endif
