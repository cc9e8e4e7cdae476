#pragma once
// The images scripts/images.sh built for the tests (the product_images fixture, tests/packaging/CMakeLists.txt):
// build/images/out/images.json lists each archive's reference and digest.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace torus::test {

struct ProductImage {
  std::string archive;    // the OCI archive, to load into the process kubelet's nodes (--load-image)
  std::string reference;  // ghcr.io/torus-dev/torus-worker:0.1.0
  std::string digest;     // the manifest's
};

// The image whose repository ends with `name` ("torus-worker", "torus-operator"). Throws naming the file and the
// fixture when the images are not built.
inline ProductImage product_image(const std::string& name) {
  const std::filesystem::path out = std::filesystem::path(TORUS_BINARY_DIR) / "images" / "out";
  std::ifstream in(out / "images.json");
  if (!in) {
    throw std::runtime_error((out / "images.json").string() +
                             " is missing: the product_images test builds the images (scripts/images.sh)");
  }
  for (const auto& image : nlohmann::json::parse(in)) {
    const std::string reference = image.at("reference").get<std::string>();
    const std::string repository = reference.substr(0, reference.rfind(':'));
    if (repository.size() >= name.size() && repository.compare(repository.size() - name.size(), name.size(), name) == 0) {
      const std::string tag = reference.substr(reference.rfind(':') + 1);
      return {(out / (name + "-" + tag + ".oci.tar")).string(), reference, image.at("digest").get<std::string>()};
    }
  }
  throw std::runtime_error((out / "images.json").string() + " lists no " + name + " image");
}

}  // namespace torus::test
