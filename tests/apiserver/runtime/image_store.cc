#include "tests/apiserver/runtime/image_store.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/util/error.h"
#include "tests/apiserver/pod_root.h"
#include "tests/apiserver/runtime/tar_reader.h"

namespace torus::standin {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// One file descriptor, closed on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string sha256_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw SystemError("images: cannot read " + file.string());
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &size);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

json read_json(const fs::path& file, const std::string& what) {
  std::ifstream in(file);
  if (!in) throw CorruptData("images: " + what + ": blob " + file.filename().string() + " is missing");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw CorruptData("images: " + what + ": not JSON: " + e.what());
  }
}

std::vector<std::string> strings(const json& doc, const char* key) {
  std::vector<std::string> out;
  if (doc.contains(key) && doc[key].is_array()) {
    for (const json& s : doc[key]) out.push_back(s.get<std::string>());
  }
  return out;
}

void check(int rc, const std::string& what) {
  if (rc != 0) throw_errno("images: " + what);
}

void apply_entry(const fs::path& root, TarReader& tar, const TarEntry& e) {
  const fs::path rel(e.path);
  for (const auto& part : rel) {
    if (part == "..") throw CorruptData("images: " + tar.describe() + ": a path with \"..\"");
  }
  const std::string name = rel.filename().string();
  const fs::path parent = resolve_in_root(root, "/" / rel.parent_path() / ".");
  if (name == ".wh..wh..opq") {  // an opaque folder: what lower layers put in it is gone
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(parent, ec)) fs::remove_all(entry.path());
    return;
  }
  if (name.rfind(".wh.", 0) == 0) {
    fs::remove_all(parent / name.substr(4));
    return;
  }
  fs::create_directories(parent);
  const fs::path target = parent / name;
  std::error_code ec;
  const auto existing = fs::symlink_status(target, ec);
  if (fs::exists(existing) && !(e.type == TarEntry::Type::kDirectory && fs::is_directory(existing))) {
    fs::remove_all(target);
  }
  const std::string where = target.string();
  switch (e.type) {
    case TarEntry::Type::kDirectory:
      fs::create_directories(target);
      check(::lchown(target.c_str(), e.uid, e.gid), "chown " + where);
      check(::chmod(target.c_str(), e.mode), "chmod " + where);
      return;
    case TarEntry::Type::kFile: {
      Fd fd(::open(target.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (fd.get() < 0) throw_errno("images: create " + where);
      tar.copy_data(fd.get());
      check(::fchown(fd.get(), e.uid, e.gid), "chown " + where);  // before the mode: chown clears setuid bits
      check(::fchmod(fd.get(), e.mode), "chmod " + where);
      return;
    }
    case TarEntry::Type::kSymlink:
      check(::symlink(e.link.c_str(), target.c_str()), "symlink " + where);
      check(::lchown(target.c_str(), e.uid, e.gid), "chown " + where);
      return;
    case TarEntry::Type::kHardlink:
      check(::link(resolve_in_root(root, "/" / fs::path(e.link)).c_str(), target.c_str()),
            "link " + where + " to " + e.link);
      return;
    case TarEntry::Type::kOther:
      return;  // devices and FIFOs: a container gets its /dev from the runtime
  }
}

void apply_layer(const fs::path& root, const fs::path& layer) {
  TarReader tar(layer);
  TarEntry e;
  while (tar.next(e)) {
    if (!e.path.empty()) apply_entry(root, tar, e);
  }
}

const std::regex& path_component() {
  static const std::regex re("[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*");
  return re;
}

}  // namespace

std::optional<std::string> normalize_reference(const std::string& image) {
  std::string name = image, tag, digest;
  if (const auto at = name.find('@'); at != std::string::npos) {
    digest = name.substr(at + 1);
    name.resize(at);
    if (!std::regex_match(digest, std::regex("sha256:[a-f0-9]{64}"))) return std::nullopt;
  }
  if (const auto colon = name.rfind(':'); colon != std::string::npos && name.find('/', colon) == std::string::npos) {
    tag = name.substr(colon + 1);
    name.resize(colon);
    if (!std::regex_match(tag, std::regex("[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"))) return std::nullopt;
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  std::string domain = "docker.io";
  const std::string& first = parts.front();
  if (parts.size() > 1 && (first.find_first_of(".:") != std::string::npos || first == "localhost")) {
    domain = first;
    parts.erase(parts.begin());
    if (!std::regex_match(domain, std::regex("[A-Za-z0-9.-]+(:[0-9]+)?"))) return std::nullopt;
  } else if (parts.size() == 1) {
    parts.insert(parts.begin(), "library");
  }
  std::string out = domain;
  for (const std::string& p : parts) {
    if (!std::regex_match(p, path_component())) return std::nullopt;
    out += "/" + p;
  }
  if (tag.empty() && digest.empty()) tag = "latest";
  if (!tag.empty()) out += ":" + tag;
  if (!digest.empty()) out += "@" + digest;
  return out;
}

ImageStore::ImageStore(fs::path root) : root_(std::move(root)) {}

fs::path ImageStore::blob(const std::string& digest) const {
  if (digest.rfind("sha256:", 0) != 0) throw CorruptData("images: unsupported digest \"" + digest + "\"");
  return root_ / "_images" / "blobs" / "sha256" / digest.substr(7);
}

std::vector<Image> ImageStore::import(const fs::path& archive) {
  const fs::path blobs = root_ / "_images" / "blobs" / "sha256";
  fs::create_directories(blobs);
  TarReader tar(archive);
  TarEntry e;
  std::optional<json> index;
  while (tar.next(e)) {
    if (e.path == "index.json") {
      try {
        index = json::parse(tar.read_data());
      } catch (const json::exception& err) {
        throw CorruptData("images: " + archive.string() + ": index.json: " + err.what());
      }
    } else if (e.type == TarEntry::Type::kFile && e.path.rfind("blobs/sha256/", 0) == 0) {
      const std::string hex = e.path.substr(13);
      const fs::path partial = blobs / (hex + ".partial");
      {
        Fd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        if (fd.get() < 0) throw_errno("images: create " + partial.string());
        tar.copy_data(fd.get());
      }
      if (const std::string got = sha256_of(partial); got != hex) {
        fs::remove(partial);
        throw CorruptData("images: " + archive.string() + ": blob " + hex + " has the digest sha256:" + got);
      }
      fs::rename(partial, blobs / hex);
    }
  }
  if (!index) throw CorruptData("images: " + archive.string() + ": no index.json (expected an OCI image layout)");
  std::vector<Image> images;
  for (const json& m : index->value("manifests", json::array())) {
    const json annotations = m.value("annotations", json::object());
    const std::string name =
        annotations.value("io.containerd.image.name", annotations.value("org.opencontainers.image.ref.name", ""));
    const auto reference = normalize_reference(name);
    if (!reference) {
      throw CorruptData("images: " + archive.string() + ": index.json names the image \"" + name +
                        "\" (io.containerd.image.name): not a reference");
    }
    images.push_back(read_image(m.value("digest", ""), *reference, archive));
  }
  return images;
}

Image ImageStore::read_image(const std::string& manifest_digest, const std::string& reference,
                             const fs::path& archive) const {
  const std::string what = archive.string() + ": " + reference;
  const json manifest = read_json(blob(manifest_digest), what + ": manifest");
  if (manifest.value("mediaType", "") != "application/vnd.oci.image.manifest.v1+json" &&
      manifest.value("mediaType", "") != "application/vnd.docker.distribution.manifest.v2+json") {
    throw CorruptData("images: " + what + ": expected an image manifest, got \"" + manifest.value("mediaType", "") +
                      "\" (indexes of several platforms are not read here)");
  }
  const json config = read_json(blob(manifest["config"].value("digest", "")), what + ": config");
  Image image{reference, manifest_digest, {}, {}};
  for (const json& layer : manifest.value("layers", json::array())) {
    const std::string digest = layer.value("digest", "");
    if (!fs::exists(blob(digest))) throw CorruptData("images: " + what + ": layer " + digest + " is missing");
    image.layers.push_back(digest);
  }
  const json c = config.value("config", json::object());
  image.config = {c.value("User", ""), strings(c, "Env"), strings(c, "Entrypoint"), strings(c, "Cmd"),
                  c.value("WorkingDir", "")};
  return image;
}

std::vector<std::string> ImageStore::load(const fs::path& archive, const std::vector<std::string>& nodes) {
  std::vector<std::string> references;
  for (const Image& image : import(archive)) {
    for (const std::string& node : nodes) add_to_node(node, image);
    references.push_back(image.reference);
  }
  return references;
}

std::vector<std::string> ImageStore::publish(const fs::path& archive) {
  std::vector<std::string> references;
  for (const Image& image : import(archive)) {
    std::lock_guard lock(mu_);
    registry_[image.reference] = image;
    references.push_back(image.reference);
  }
  return references;
}

void ImageStore::add_to_node(const std::string& node, const Image& image) {
  std::lock_guard lock(mu_);
  nodes_[node][image.reference] = image;
}

std::optional<Image> ImageStore::on_node(const std::string& node, const std::string& reference) const {
  std::lock_guard lock(mu_);
  auto n = nodes_.find(node);
  if (n == nodes_.end()) return std::nullopt;
  auto it = n->second.find(reference);
  if (it != n->second.end()) return it->second;
  for (const auto& [ref, image] : n->second) {  // by digest: name@sha256:... matches the manifest's digest
    if (reference.ends_with("@" + image.manifest_digest)) return image;
  }
  return std::nullopt;
}

std::optional<Image> ImageStore::in_registry(const std::string& reference) const {
  std::lock_guard lock(mu_);
  auto it = registry_.find(reference);
  if (it == registry_.end()) return std::nullopt;
  return it->second;
}

fs::path ImageStore::rootfs(const std::string& node, const Image& image) {
  const fs::path dir = root_ / "_nodes" / node / "images" / image.manifest_digest.substr(7);
  const fs::path done = dir / "rootfs";
  std::lock_guard lock(unpack_mu_);
  if (fs::exists(done)) return done;
  const fs::path partial = dir / "rootfs.partial";
  fs::remove_all(partial);
  fs::create_directories(partial);
  for (const std::string& layer : image.layers) {
    try {
      apply_layer(partial, blob(layer));
    } catch (const Error& e) {
      throw CorruptData(std::string(e.what()) + " (unpacking " + image.reference + " layer " + layer + ")");
    }
  }
  check(::chmod(partial.c_str(), 0755), "chmod " + partial.string());
  fs::rename(partial, done);
  return done;
}

}  // namespace torus::standin
