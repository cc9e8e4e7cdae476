#include "worker/data/jpeg_folder.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "common/util/error.h"

namespace torus::worker::data {
namespace {

namespace fs = std::filesystem;

// One TurboJPEG handle per thread and direction: handles are not thread-safe, and creating one per image costs.
class TjHandle {
 public:
  explicit TjHandle(tjhandle h) : handle_(h) {
    if (!handle_) throw SystemError(std::string("TurboJPEG: cannot create a handle: ") + tjGetErrorStr2(nullptr));
  }
  TjHandle(const TjHandle&) = delete;
  TjHandle& operator=(const TjHandle&) = delete;
  ~TjHandle() { tjDestroy(handle_); }
  tjhandle get() const { return handle_; }

 private:
  tjhandle handle_;
};

tjhandle decompressor() {
  thread_local TjHandle handle(tjInitDecompress());
  return handle.get();
}

tjhandle compressor() {
  thread_local TjHandle handle(tjInitCompress());
  return handle.get();
}

bool is_jpeg_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".jpg" || ext == ".jpeg";
}

// The smallest TurboJPEG scaling factor (num/denom <= 1) that keeps the image at least 1/max_downscale of native.
tjscalingfactor pick_scale(double max_downscale) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  tjscalingfactor best{1, 1};
  for (int i = 0; i < count; ++i) {
    const double f = static_cast<double>(factors[i].num) / factors[i].denom;
    const double best_f = static_cast<double>(best.num) / best.denom;
    if (f <= 1.0 && f * max_downscale >= 1.0 && f < best_f) best = factors[i];
  }
  return best;
}

}  // namespace

ImageSize jpeg_size(const std::vector<uint8_t>& bytes, const std::string& name) {
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(decompressor(), bytes.data(), static_cast<unsigned long>(bytes.size()), &w, &h, &subsamp,
                          &colorspace) != 0) {
    throw CorruptData(name + ": not a readable JPEG header: " + tjGetErrorStr2(decompressor()));
  }
  return {h, w};
}

namespace {

Image decode_known(const std::vector<uint8_t>& bytes, ImageSize native, double max_downscale, const std::string& name) {
  const tjscalingfactor scale = pick_scale(std::max(1.0, max_downscale));
  const int w = TJSCALED(native.w, scale);
  const int h = TJSCALED(native.h, scale);
  std::vector<uint8_t> rgb(static_cast<size_t>(h) * w * 3);
  if (tjDecompress2(decompressor(), bytes.data(), static_cast<unsigned long>(bytes.size()), rgb.data(), w, 0, h,
                    TJPF_RGB, TJFLAG_FASTDCT) != 0) {
    // Warnings (e.g. extraneous bytes) still produce an image; only fatal errors are corrupt data.
    if (tjGetErrorCode(decompressor()) == TJERR_FATAL) {
      throw CorruptData(name + ": cannot decode JPEG: " + tjGetErrorStr2(decompressor()));
    }
  }
  Image img = Image::owning(std::move(rgb), h, w, 3);
  img.native = native;
  return img;
}

}  // namespace

Image decode_jpeg(const std::vector<uint8_t>& bytes, double max_downscale, const std::string& name) {
  return decode_known(bytes, jpeg_size(bytes, name), max_downscale, name);
}

std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int h, int w, int quality) {
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (tjCompress2(compressor(), rgb, w, 0, h, TJPF_RGB, &out, &size, TJSAMP_420, quality, 0) != 0) {
    throw SystemError(std::string("TurboJPEG: cannot encode: ") + tjGetErrorStr2(compressor()));
  }
  std::vector<uint8_t> bytes(out, out + size);
  tjFree(out);
  return bytes;
}

std::shared_ptr<JpegFolder> JpegFolder::open(const std::string& root, Split split) {
  const fs::path dir = fs::path(root) / (split == Split::kTrain ? "train" : "val");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InvalidArgument(dir.string() + ": expected a folder of class folders (root/{train,val}/<class>/*.jpg)");
  }
  std::vector<std::string> classes;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) classes.push_back(entry.path().filename().string());
  }
  std::sort(classes.begin(), classes.end());
  std::vector<std::string> files;
  std::vector<int32_t> labels;
  for (size_t k = 0; k < classes.size(); ++k) {
    std::vector<std::string> class_files;
    for (const auto& entry : fs::directory_iterator(dir / classes[k])) {
      if (entry.is_regular_file() && is_jpeg_name(entry.path())) class_files.push_back(entry.path().string());
    }
    std::sort(class_files.begin(), class_files.end());
    files.insert(files.end(), class_files.begin(), class_files.end());
    labels.insert(labels.end(), class_files.size(), static_cast<int32_t>(k));
  }
  if (files.empty()) {
    throw InvalidArgument(dir.string() + ": no JPEG files found in any class folder (expected <class>/*.jpg)");
  }
  return std::shared_ptr<JpegFolder>(
      new JpegFolder(dir.string(), std::move(classes), std::move(files), std::move(labels)));
}

JpegFolder::JpegFolder(std::string dir, std::vector<std::string> classes, std::vector<std::string> files,
                       std::vector<int32_t> labels)
    : dir_(std::move(dir)), classes_(std::move(classes)), files_(std::move(files)), labels_(std::move(labels)) {}

void JpegFolder::read_all_sizes() const {
  sizes_.resize(files_.size());
  for (size_t i = 0; i < files_.size(); ++i) sizes_[i] = jpeg_size(read_file_bytes(files_[i]), files_[i]);
}

ImageSize JpegFolder::native_size(int64_t index) const {
  std::call_once(sizes_once_, [this] { read_all_sizes(); });
  return sizes_[static_cast<size_t>(index)];
}

Image JpegFolder::decode(int64_t index, const DownscalePolicy& max_downscale) const {
  const std::string& file = files_[static_cast<size_t>(index)];
  const std::vector<uint8_t> bytes = read_file_bytes(file);
  const ImageSize native = jpeg_size(bytes, file);
  return decode_known(bytes, native, max_downscale ? max_downscale(native) : 1.0, file);
}

}  // namespace torus::worker::data
