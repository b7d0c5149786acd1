// png.cpp — see png.h.
#include "support/png.h"

#include <png.h>

#include <cstdlib>
#include <stdexcept>
#include <unordered_set>

namespace sal::test {

size_t Image::distinct_colors() const {
  std::unordered_set<uint32_t> seen;
  for (size_t i = 0; i + 2 < rgb.size(); i += 3)
    seen.insert(uint32_t(rgb[i]) << 16 | uint32_t(rgb[i + 1]) << 8 | rgb[i + 2]);
  return seen.size();
}

bool Image::has_color(uint32_t hex, int tolerance) const {
  const int want[3] = {int(hex >> 16 & 0xff), int(hex >> 8 & 0xff), int(hex & 0xff)};
  for (size_t i = 0; i + 2 < rgb.size(); i += 3)
    if (std::abs(rgb[i] - want[0]) <= tolerance && std::abs(rgb[i + 1] - want[1]) <= tolerance &&
        std::abs(rgb[i + 2] - want[2]) <= tolerance)
      return true;
  return false;
}

Image read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    throw std::runtime_error(path + ": not a readable PNG: " + image.message);
  image.format = PNG_FORMAT_RGB;
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) {
    std::string why = image.message;
    png_image_free(&image);
    throw std::runtime_error(path + ": cannot decode the PNG: " + why);
  }
  return out;
}

}  // namespace sal::test
