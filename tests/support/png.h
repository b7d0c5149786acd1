// png.h — a PNG file read into 8-bit RGB pixels (libpng's simplified API), for tests that look at a
// screenshot: its size, how many distinct colors it holds (a blank page has one or two), and whether
// a given color occurs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sal::test {

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // 3 bytes a pixel, row by row

  size_t distinct_colors() const;
  // Whether some pixel is within `tolerance` of 0xRRGGBB in every channel.
  bool has_color(uint32_t hex, int tolerance = 0) const;
};

// Throws std::runtime_error naming the file when it is not a PNG that libpng can read.
Image read_png(const std::string& path);

}  // namespace sal::test
