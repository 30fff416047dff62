// Fuzzes the host's stream decoder with what a rank (or anyone reaching the port) could
// send: arbitrary bytes, fed in two pieces at a point the input chooses, must decode or
// be refused with an error, never read out of bounds or hold more than a frame.
#include <cstdint>
#include <vector>

#include "loom/stream/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t split = data[0] % size;  // the first byte picks where recv() cut
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  const std::size_t n = size - 1;
  loom::stream::FrameDecoder decoder;
  std::vector<loom::stream::Frame> frames;
  const std::size_t first = split < n ? split : n;
  if (decoder.feed(bytes, first, frames).ok()) (void)decoder.feed(bytes + first, n - first, frames);
  return 0;
}
