#pragma once
// The trace buffer's shape (compile option `trace`, tile/trace.cuh), shared
// verbatim by kernels and host.
namespace tc {

constexpr int kTraceSlots = 16;    // stamps per CTA
constexpr int kTraceCtas = 1024;   // CTAs (linear block index) recorded per kernel

}  // namespace tc
