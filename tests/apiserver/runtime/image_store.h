#pragma once
// The images the process kubelet's nodes hold, as containerd keeps them (docs/testing.md, "Images"):
//   <root>/_images/blobs/sha256/<hex>               every blob imported, checked against its digest, stored once
//   <root>/_nodes/<node>/images/<manifest hex>/rootfs  an image unpacked once on a node (the snapshot its
//                                                       containers' roots lie over), made on the first container
// Which node has which image is kept here: `kind load image-archive` puts an archive's images on every node (load),
// a registry holds the images a node may pull (publish). Layers apply as the OCI image spec says: in order, with
// whiteouts (.wh.NAME removes NAME, .wh..wh..opq empties a folder), owners and modes as archived.
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torus::standin {

// The image config's "config": what a container of the image runs, before the pod's own settings.
struct ImageConfig {
  std::string user;  // "65532:65532", "65532", "nonroot", "" (root)
  std::vector<std::string> env, entrypoint, cmd;
  std::string working_dir;
};

struct Image {
  std::string reference;            // normalised: docker.io/library/busybox:1.36, ghcr.io/torus-dev/torus-worker:0.1.0
  std::string manifest_digest;      // "sha256:...": the image's id as a pod's status shows it (imageID)
  std::vector<std::string> layers;  // blob digests, lowest first
  ImageConfig config;
};

// A reference as containerd normalises a pod's `image` (docker's reference grammar): docker.io/ for a name without
// a registry host, library/ for a single-component Docker Hub name, :latest when neither tag nor digest is given.
// nullopt when the reference is malformed (the kubelet's InvalidImageName).
std::optional<std::string> normalize_reference(const std::string& image);

class ImageStore {
 public:
  explicit ImageStore(std::filesystem::path root);

  // Imports the OCI archive (an image layout in a tar: index.json, blobs/sha256/...; what scripts/images.sh writes)
  // and puts its images on `nodes`, as `kind load image-archive` does. Returns their references. Throws
  // CorruptData naming the archive and what is wrong (a blob whose digest differs, a missing blob, no index.json).
  std::vector<std::string> load(const std::filesystem::path& archive, const std::vector<std::string>& nodes);
  // Imports the archive into the registry the nodes pull from.
  std::vector<std::string> publish(const std::filesystem::path& archive);

  std::optional<Image> on_node(const std::string& node, const std::string& reference) const;
  std::optional<Image> in_registry(const std::string& reference) const;
  void add_to_node(const std::string& node, const Image& image);  // a pull's end

  // The image's files on `node`, unpacked there the first time (SystemError or CorruptData naming the layer).
  std::filesystem::path rootfs(const std::string& node, const Image& image);

 private:
  std::vector<Image> import(const std::filesystem::path& archive);
  Image read_image(const std::string& manifest_digest, const std::string& reference,
                   const std::filesystem::path& archive) const;
  std::filesystem::path blob(const std::string& digest) const;

  std::filesystem::path root_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, Image>> nodes_;  // node -> reference -> image
  std::map<std::string, Image> registry_;
  std::mutex unpack_mu_;  // one unpack at a time: two first containers of an image on one node share it
};

}  // namespace torus::standin
