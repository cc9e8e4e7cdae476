#include "worker/comm/shm_communicator.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>

#include "common/log/log.h"
#include "common/util/env.h"
#include "common/util/error.h"
#include "common/util/random.h"

namespace torus::comm {

struct ShmCommunicator::Header {
  alignas(64) std::atomic<uint32_t> wake;  // futex word: bumped on every arrival
  alignas(64) std::atomic<uint32_t> aborted;
  struct alignas(64) Epoch {
    std::atomic<uint64_t> value;
  };
  Epoch epoch[kMaxRanks];               // barriers each rank has reached, one cache line each
  std::atomic<int32_t> pid[kMaxRanks];  // so a waiter can tell a dead local peer from a slow one
};

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "process-shared atomics must be lock-free");

// Owns the mmap of the segment.
class ShmCommunicator::Mapping {
 public:
  Mapping(void* addr, size_t bytes) : addr_(addr), bytes_(bytes) {}
  ~Mapping() { ::munmap(addr_, bytes_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  std::byte* data() const { return static_cast<std::byte*>(addr_); }

 private:
  void* addr_;
  size_t bytes_;
};

namespace {

constexpr size_t kHeaderBytes = 64 * 1024;  // header padded so slots start page-aligned
// A short poll before sleeping on the futex; none when the group has more ranks than CPUs: a spinning waiter would
// steal the core its descheduled peer needs.
constexpr int kSpinsBeforeSleep = 128;
// All-reduce and all-gather buffers from this size on are written back with streaming stores (copy_out_for).
constexpr size_t kStreamingBytes = 16u << 20;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// tmpfs accepts an ftruncate beyond its free space and then kills the process with SIGBUS on first touch: size the
// segment to what /dev/shm can hold (a pod's default /dev/shm is only 64 MiB).
size_t fit_slot_bytes(size_t wanted, int ranks) {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return wanted;
  const size_t free_bytes = static_cast<size_t>(fs.f_bavail) * fs.f_frsize;
  const size_t per_slot_budget = (free_bytes / 2) / (2 * static_cast<size_t>(ranks));  // leave half for others
  if (wanted <= per_slot_budget) return wanted;
  const size_t fitted = std::max<size_t>(64 << 10, per_slot_budget / 4096 * 4096);
  TLOG(Warn) << "shared-memory group: /dev/shm has " << free_bytes << " bytes free; using " << fitted
             << "-byte slots instead of " << wanted << " (raise /dev/shm or lower TORUS_SHM_SLOT_BYTES)";
  return fitted;
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns) {
  timespec ts{0, timeout_ns};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Copies with non-temporal stores: `dst` is written without first being read into the cache (no read-for-ownership)
// and without evicting the shared window. Only for destinations that will have left the cache before they are read.
void copy_cached(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void copy_streaming(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
#if defined(__x86_64__) || defined(__i386__)
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64)
    for (size_t k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + k),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + k)));
  std::memcpy(d + i, s + i, bytes - i);
  _mm_sfence();
#else
  std::memcpy(d, s, bytes);
#endif
}

using CopyFn = void (*)(void*, const void*, size_t);

// How peers' results are written into a caller's buffer of `bytes`: a buffer this large has left the cache before
// its next reader, so its lines are written with streaming stores (at 64 MiB on 2 ranks the all-reduce's copy-out
// took 4-5 ms instead of 13-14, docs/collectives.md "Measured").
CopyFn copy_out_for(size_t bytes) { return bytes >= kStreamingBytes ? copy_streaming : copy_cached; }

}  // namespace

ShmCommunicator::ShmCommunicator(int rank, int size, std::shared_ptr<Store> store, const ShmOptions& options)
    : Communicator(rank, size, options.timeout), options_(options), spin_limit_(spin_limit_for(size)) {
  if (size > kMaxRanks)
    throw InvalidArgument("shared-memory group: at most " + std::to_string(kMaxRanks) + " ranks per host, got " +
                          std::to_string(size));
  // Rank 0 sizes and creates the segment and publishes "<name> <slot bytes>": every rank must agree on the layout.
  std::string name;
  Fd fd;
  if (rank == 0) {
    options_.slot_bytes = fit_slot_bytes(std::max<size_t>(4096, options_.slot_bytes / 4096 * 4096), size);
    name = "/torus-" + random_hex(8);
    fd = Fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (!fd.valid()) throw_errno("shm_open " + name);
    if (::ftruncate(fd.get(), static_cast<off_t>(segment_bytes())) != 0) {
      ::shm_unlink(name.c_str());
      throw_errno("ftruncate " + name + " to " + std::to_string(segment_bytes()) + " bytes");
    }
    store->set("shm/name", to_bytes(name + " " + std::to_string(options_.slot_bytes)));
  } else {
    std::istringstream in(to_string(store->get("shm/name", options_.timeout)));
    in >> name >> options_.slot_bytes;
    fd = Fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
    if (!fd.valid()) throw_errno("shm_open " + name);
  }
  const size_t bytes = segment_bytes();
  void* addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (addr == MAP_FAILED) {
    if (rank == 0) ::shm_unlink(name.c_str());
    throw_errno("mmap " + name);
  }
  mapping_ = std::make_unique<Mapping>(addr, bytes);
  header_ = reinterpret_cast<Header*>(mapping_->data());  // zero-filled by ftruncate: all counters start at 0
  slots_ = mapping_->data() + kHeaderBytes;
  header_->pid[rank].store(static_cast<int32_t>(::getpid()));
  store->set("shm/mapped/" + std::to_string(rank), to_bytes("1"));
  if (rank == 0) {
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("shm/mapped/" + std::to_string(r));
    std::vector<std::string> missing = store->wait(keys, options_.timeout);
    ::shm_unlink(name.c_str());  // mapped by all (or given up): the name is no longer needed
    if (!missing.empty())
      throw Timeout("shared-memory group: " + std::to_string(missing.size()) + " local ranks never mapped " + name);
  }
}

ShmCommunicator::~ShmCommunicator() { stop_thread(); }

int ShmCommunicator::spin_limit_for(int ranks) { return ranks <= env::available_cpus() ? kSpinsBeforeSleep : 0; }

void ShmCommunicator::abort() noexcept {
  header_->aborted.store(1);
  header_->wake.fetch_add(1);
  futex_wake_all(&header_->wake);
}

size_t ShmCommunicator::segment_bytes() const {
  return kHeaderBytes + 2 * static_cast<size_t>(size()) * options_.slot_bytes;
}

std::byte* ShmCommunicator::slot(int set, int r) const {
  return slots_ +
         (static_cast<size_t>(set) * static_cast<size_t>(size()) + static_cast<size_t>(r)) * options_.slot_bytes;
}

void ShmCommunicator::sync() {
  const uint64_t target = ++epoch_;
  header_->epoch[rank()].value.store(target, std::memory_order_release);
  header_->wake.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(&header_->wake);
  const auto deadline = Clock::now() + timeout();
  auto all_arrived = [&] {
    for (int j = 0; j < size(); ++j)
      if (header_->epoch[j].value.load(std::memory_order_acquire) < target) return false;
    return true;
  };
  for (int spins = 0;; ++spins) {
    const uint32_t seen = header_->wake.load(std::memory_order_acquire);
    if (all_arrived()) return;
    if (header_->aborted.load() != 0) throw Error("shared-memory communicator was aborted");
    if (spins < spin_limit_) {
      cpu_relax();
      continue;
    }
    for (int j = 0; j < size(); ++j) {
      const int32_t pid = header_->pid[j].load();
      if (header_->epoch[j].value.load() < target && ::kill(pid, 0) != 0 && errno == ESRCH)
        throw SystemError("shared-memory group: local rank " + std::to_string(j) + " (pid " + std::to_string(pid) +
                          ") died during a collective");
    }
    if (Clock::now() > deadline) {
      std::string missing;
      for (int j = 0; j < size(); ++j)
        if (header_->epoch[j].value.load() < target) missing += (missing.empty() ? "" : ", ") + std::to_string(j);
      throw Timeout("shared-memory barrier: local ranks " + missing + " never arrived within " +
                    std::to_string(timeout().count()) + " ms (dead or hung peer on this host)");
    }
    futex_wait(&header_->wake, seen, 5'000'000);
  }
}

void ShmCommunicator::all_reduce_now(BufferView buf, ReduceOp op) {
  const int n = size();
  if (buf.count == 0 || n == 1) return;
  const size_t elem = dtype_size(buf.dtype);
  const size_t window = options_.slot_bytes / elem;
  const CopyFn copy_out = copy_out_for(buf.bytes());
  std::vector<const void*> inputs(static_cast<size_t>(n));
  for (size_t start = 0; start < buf.count; start += window) {
    const size_t len = std::min(window, buf.count - start);
    const int set = next_set();
    const Range mine = chunk_range(len, n, rank());
    // Peers read only the slices they reduce: our own slice stays in our buffer and is read from there.
    std::memcpy(slot(set, rank()), buf.at(start), mine.begin * elem);
    std::memcpy(slot(set, rank()) + mine.end * elem, buf.at(start + mine.end), (len - mine.end) * elem);
    sync();  // every input is in place
    // Reduced in place (one read-modify-write pass over our slice), then published from the cache for the peers.
    // The output must be the first input (reduce_many writes it before reading the later ones); every rank copies
    // the one reduced slice, so all ranks still hold identical results.
    inputs[0] = buf.at(start + mine.begin);
    for (int j = 0, k = 1; j < n; ++j)
      if (j != rank()) inputs[static_cast<size_t>(k++)] = slot(set, j) + mine.begin * elem;
    reduce_many(buf.dtype, op, buf.at(start + mine.begin), inputs.data(), n, mine.size());
    std::memcpy(slot(set, rank()) + mine.begin * elem, buf.at(start + mine.begin), mine.size() * elem);
    sync();  // every slice is reduced
    for (int j = 0; j < n; ++j) {
      if (j == rank()) continue;
      const Range theirs = chunk_range(len, n, j);
      copy_out(buf.at(start + theirs.begin), slot(set, j) + theirs.begin * elem, theirs.size() * elem);
    }
  }
}

void ShmCommunicator::reduce_scatter_now(BufferView buf, ReduceOp op) {
  const int n = size();
  if (buf.count == 0 || n == 1) return;
  const size_t elem = dtype_size(buf.dtype);
  // Slot r holds n pieces, one per destination rank: piece j carries rank r's contribution to rank j's chunk.
  const size_t piece = std::max<size_t>(1, options_.slot_bytes / elem / static_cast<size_t>(n));
  size_t longest = 0;
  for (int j = 0; j < n; ++j) longest = std::max(longest, chunk_range(buf.count, n, j).size());
  std::vector<const void*> inputs(static_cast<size_t>(n));
  for (size_t offset = 0; offset < longest; offset += piece) {
    const int set = next_set();
    for (int j = 0; j < n; ++j) {
      const Range c = chunk_range(buf.count, n, j);
      if (offset >= c.size()) continue;
      const size_t len = std::min(piece, c.size() - offset);
      std::memcpy(slot(set, rank()) + static_cast<size_t>(j) * piece * elem, buf.at(c.begin + offset), len * elem);
    }
    sync();
    const Range mine = chunk_range(buf.count, n, rank());
    if (offset < mine.size()) {
      const size_t len = std::min(piece, mine.size() - offset);
      for (int j = 0; j < n; ++j)
        inputs[static_cast<size_t>(j)] = slot(set, j) + static_cast<size_t>(rank()) * piece * elem;
      reduce_many(buf.dtype, op, buf.at(mine.begin + offset), inputs.data(), n, len);
    }
  }
}

void ShmCommunicator::all_gather_now(BufferView buf) {
  const int n = size();
  if (buf.count == 0 || n == 1) return;
  const size_t elem = dtype_size(buf.dtype);
  const size_t piece = options_.slot_bytes / elem;
  size_t longest = 0;
  for (int j = 0; j < n; ++j) longest = std::max(longest, chunk_range(buf.count, n, j).size());
  const Range mine = chunk_range(buf.count, n, rank());
  const CopyFn copy_out = copy_out_for(buf.bytes());
  for (size_t offset = 0; offset < longest; offset += piece) {
    const int set = next_set();
    if (offset < mine.size())
      std::memcpy(slot(set, rank()), buf.at(mine.begin + offset), std::min(piece, mine.size() - offset) * elem);
    sync();
    for (int j = 0; j < n; ++j) {
      const Range c = chunk_range(buf.count, n, j);
      if (j == rank() || offset >= c.size()) continue;
      copy_out(buf.at(c.begin + offset), slot(set, j), std::min(piece, c.size() - offset) * elem);
    }
  }
}

void ShmCommunicator::broadcast_now(BufferView buf, int root) {
  if (buf.count == 0 || size() == 1) return;
  const size_t bytes = buf.bytes();
  auto* data = static_cast<std::byte*>(buf.data);
  for (size_t offset = 0; offset < bytes; offset += options_.slot_bytes) {
    const size_t len = std::min(options_.slot_bytes, bytes - offset);
    const int set = next_set();
    if (rank() == root) std::memcpy(slot(set, root), data + offset, len);
    sync();
    if (rank() != root) std::memcpy(data + offset, slot(set, root), len);
  }
}

void ShmCommunicator::barrier_now() {
  if (size() > 1) sync();
}

std::unique_ptr<Communicator> ShmCommunicator::split(int /*color*/, int /*key*/) {
  throw InvalidArgument("split: the shared-memory communicator is a leaf; split the world communicator instead");
}

}  // namespace torus::comm
