// Build step: nv2khr IN.spv OUT.spv (spirv/nv2khr.h); exits 1 with the reason on a module it cannot rewrite.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "spirv/nv2khr.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: nv2khr IN.spv OUT.spv\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    std::fprintf(stderr, "[spirv] cannot read %s\n", argv[1]);
    return 1;
  }
  std::vector<uint32_t> words(bytes.size() / 4);
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(words.size() * 4),
            reinterpret_cast<char*>(words.data()));
  try {
    const std::vector<uint32_t> out = alpha::spirv::nv_to_khr(words);
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
    if (!o) {
      std::fprintf(stderr, "[spirv] cannot write %s\n", argv[2]);
      return 1;
    }
  } catch (const alpha::spirv::RewriteError& e) {
    std::fprintf(stderr, "%s (%s)\n", e.what(), argv[1]);
    return 1;
  }
  return 0;
}
