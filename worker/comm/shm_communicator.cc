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
  struct alignas(64) Counter {  // one cache line each: a rank's counters are polled by every peer
    std::atomic<uint64_t> value;
  };
  alignas(64) std::atomic<uint32_t> wake;  // futex word: bumped whenever a counter moves
  alignas(64) std::atomic<uint32_t> sleepers;  // waiters inside futex_wait: a mover skips the wake syscall when 0
  alignas(64) std::atomic<uint32_t> aborted;
  Counter epoch[kMaxRanks];  // barriers each rank has reached
  // All-reduce windows each rank has staged (its inputs for the peers' slices are in its ring slot), reduced (its
  // own slice is in its ring slot) and gathered (it has read everything it needs of that window from the peers).
  Counter staged[kMaxRanks];
  Counter reduced[kMaxRanks];
  Counter gathered[kMaxRanks];
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
size_t fit_slot_bytes(size_t wanted, int ranks, int slots_per_rank) {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return wanted;
  const size_t free_bytes = static_cast<size_t>(fs.f_bavail) * fs.f_frsize;
  const size_t slots = static_cast<size_t>(slots_per_rank) * static_cast<size_t>(ranks);
  const size_t per_slot_budget = (free_bytes / 2) / slots;  // leave half for others
  if (wanted <= per_slot_budget) return wanted;
  const size_t fitted = std::max<size_t>(64 << 10, per_slot_budget / 4096 * 4096);
  TLOG(Warn) << "shared-memory group: /dev/shm has " << free_bytes << " bytes free; using " << fitted
             << "-byte slots instead of " << wanted << " (raise /dev/shm or lower TORUS_SHM_SLOT_BYTES)";
  return fitted;
}

// Two double-buffered sets for the barrier collectives, then all-reduce's ring.
int slots_per_rank(const ShmOptions& o) { return 2 + o.ring_slots; }

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
  static_assert(sizeof(Header) <= kHeaderBytes);
  if (size > kMaxRanks)
    throw InvalidArgument("shared-memory group: at most " + std::to_string(kMaxRanks) + " ranks per host, got " +
                          std::to_string(size));
  if (options_.ring_slots < 1)
    throw InvalidArgument("shared-memory group: ring_slots must be at least 1, got " +
                          std::to_string(options_.ring_slots));
  // Rank 0 sizes and creates the segment and publishes "<name> <slot bytes> <ring slots>": every rank must agree on
  // the layout.
  std::string name;
  Fd fd;
  if (rank == 0) {
    options_.slot_bytes = fit_slot_bytes(std::max<size_t>(4096, options_.slot_bytes / 4096 * 4096), size,
                                         slots_per_rank(options_));
    name = "/torus-" + random_hex(8);
    fd = Fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
    if (!fd.valid()) throw_errno("shm_open " + name);
    if (::ftruncate(fd.get(), static_cast<off_t>(segment_bytes())) != 0) {
      ::shm_unlink(name.c_str());
      throw_errno("ftruncate " + name + " to " + std::to_string(segment_bytes()) + " bytes");
    }
    store->set("shm/name", to_bytes(name + " " + std::to_string(options_.slot_bytes) + " " +
                                    std::to_string(options_.ring_slots)));
  } else {
    std::istringstream in(to_string(store->get("shm/name", options_.timeout)));
    in >> name >> options_.slot_bytes >> options_.ring_slots;
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
  return kHeaderBytes + static_cast<size_t>(slots_per_rank(options_)) * static_cast<size_t>(size()) *
                            options_.slot_bytes;
}

std::byte* ShmCommunicator::slot(int set, int r) const {
  return slots_ +
         (static_cast<size_t>(set) * static_cast<size_t>(size()) + static_cast<size_t>(r)) * options_.slot_bytes;
}

std::byte* ShmCommunicator::ring_slot(uint64_t window, int r) const {
  const size_t ring = static_cast<size_t>(options_.ring_slots);
  const size_t index = static_cast<size_t>(window % ring);
  return slot(2, 0) + (static_cast<size_t>(r) * ring + index) * options_.slot_bytes;  // after the two sets
}

void ShmCommunicator::publish() {
  header_->wake.fetch_add(1);  // seq_cst, as is the waiters' sleepers increment: one of us sees the other
  if (header_->sleepers.load() != 0) futex_wake_all(&header_->wake);
}


template <typename Ready, typename Lagging>
void ShmCommunicator::wait_until(Ready ready, Lagging lagging, const char* what) {
  if (ready()) return;
  const auto deadline = Clock::now() + timeout();
  for (int spins = 0;; ++spins) {
    const uint32_t seen = header_->wake.load();
    if (ready()) return;
    if (header_->aborted.load() != 0) throw Error("shared-memory communicator was aborted");
    if (spins < spin_limit_) {
      cpu_relax();
      continue;
    }
    for (int j = 0; j < size(); ++j) {
      const int32_t pid = header_->pid[j].load();
      if (j != rank() && lagging(j) && ::kill(pid, 0) != 0 && errno == ESRCH)
        throw SystemError("shared-memory group: local rank " + std::to_string(j) + " (pid " + std::to_string(pid) +
                          ") died during a collective");
    }
    if (Clock::now() > deadline) {
      std::string missing;
      for (int j = 0; j < size(); ++j)
        if (j != rank() && lagging(j)) missing += (missing.empty() ? "" : ", ") + std::to_string(j);
      throw Timeout(std::string("shared-memory ") + what + ": local ranks " + missing + " never arrived within " +
                    std::to_string(timeout().count()) + " ms (dead or hung peer on this host)");
    }
    header_->sleepers.fetch_add(1);
    if (header_->wake.load() == seen) futex_wait(&header_->wake, seen, 5'000'000);
    header_->sleepers.fetch_sub(1);
  }
}

void ShmCommunicator::sync() {
  const uint64_t target = ++epoch_;
  header_->epoch[rank()].value.store(target, std::memory_order_release);
  publish();
  auto behind = [&](int j) { return header_->epoch[j].value.load(std::memory_order_acquire) < target; };
  wait_until(
      [&] {
        for (int j = 0; j < size(); ++j)
          if (behind(j)) return false;
        return true;
      },
      behind, "barrier");
}

// Window w of this call is window base + w of the ring. Per window, a rank stages the peers' slices of its buffer
// into its ring slot, reduces its own slice in place from its buffer and the peers' slots and publishes the result
// to its slot, then gathers the peers' reduced slices. Steps are taken in the order that keeps data hot: gather the
// oldest reduced window, else reduce the oldest staged one, else stage the next (up to ring_slots ahead of the
// slowest peer's gathers: its slot is reused only once every peer has read it). All ranks compute the same sums.
void ShmCommunicator::all_reduce_now(BufferView buf, ReduceOp op) {
  const int n = size();
  if (buf.count == 0 || n == 1) return;
  const size_t elem = dtype_size(buf.dtype);
  const size_t window = options_.slot_bytes / elem;
  const uint64_t windows = (buf.count + window - 1) / window;
  const uint64_t base = windows_;
  windows_ += windows;
  const uint64_t ring = static_cast<uint64_t>(options_.ring_slots);
  const CopyFn copy_out = copy_out_for(buf.bytes());
  auto length = [&](uint64_t w) { return std::min(window, buf.count - w * window); };
  Header& h = *header_;
  const int me = rank();
  uint64_t staged = 0, reduced = 0, gathered = 0;  // windows of this call, on this rank

  enum class Step { kNone, kGather, kReduce, kStage };
  // Peer j holds up each step until its counter passes the window the step needs.
  auto blocks_gather = [&](int j) { return h.reduced[j].value.load(std::memory_order_acquire) <= base + gathered; };
  auto blocks_reduce = [&](int j) { return h.staged[j].value.load(std::memory_order_acquire) <= base + reduced; };
  auto blocks_stage = [&](int j) {
    return h.gathered[j].value.load(std::memory_order_acquire) + ring <= base + staged;
  };
  auto no_peer = [&](auto blocks) {
    for (int j = 0; j < n; ++j)
      if (j != me && blocks(j)) return false;
    return true;
  };
  auto next_step = [&] {
    if (gathered < reduced && no_peer(blocks_gather)) return Step::kGather;
    if (reduced < staged && no_peer(blocks_reduce)) return Step::kReduce;
    if (staged < windows && no_peer(blocks_stage)) return Step::kStage;
    return Step::kNone;
  };
  auto lagging = [&](int j) {
    return (gathered < reduced && blocks_gather(j)) || (reduced < staged && blocks_reduce(j)) ||
           (staged < windows && blocks_stage(j));
  };

  // Reduced a block at a time and published while the block is still in L1.
  constexpr size_t kBlockBytes = 16u << 10;
  const size_t block = std::max<size_t>(1, kBlockBytes / elem);
  std::vector<const void*> inputs(static_cast<size_t>(n));
  while (gathered < windows) {
    Step step = next_step();
    if (step == Step::kNone) {
      wait_until([&] { return (step = next_step()) != Step::kNone; }, lagging, "all-reduce");
    }
    if (step == Step::kStage) {
      const uint64_t w = staged;
      const size_t start = w * window;
      const size_t len = length(w);
      const Range mine = chunk_range(len, n, me);
      std::byte* out = ring_slot(base + w, me);
      // Peers read only the slices they reduce: our own slice stays in our buffer and is read from there.
      std::memcpy(out, buf.at(start), mine.begin * elem);
      std::memcpy(out + mine.end * elem, buf.at(start + mine.end), (len - mine.end) * elem);
      h.staged[me].value.store(base + ++staged, std::memory_order_release);
    } else if (step == Step::kReduce) {
      const uint64_t w = reduced;
      const size_t start = w * window;
      const Range mine = chunk_range(length(w), n, me);
      std::byte* published = ring_slot(base + w, me);
      // In place (one read-modify-write pass); reduce_many writes its output before reading the later inputs, so
      // the output must be the first input.
      for (size_t b = mine.begin; b < mine.end; b += block) {
        const size_t count = std::min(block, mine.end - b);
        inputs[0] = buf.at(start + b);
        for (int j = 0, k = 1; j < n; ++j)
          if (j != me) inputs[static_cast<size_t>(k++)] = ring_slot(base + w, j) + b * elem;
        reduce_many(buf.dtype, op, buf.at(start + b), inputs.data(), n, count);
        std::memcpy(published + b * elem, buf.at(start + b), count * elem);
      }
      h.reduced[me].value.store(base + ++reduced, std::memory_order_release);
    } else {
      const uint64_t w = gathered;
      const size_t start = w * window;
      const size_t len = length(w);
      for (int j = 0; j < n; ++j) {
        if (j == me) continue;
        const Range theirs = chunk_range(len, n, j);
        copy_out(buf.at(start + theirs.begin), ring_slot(base + w, j) + theirs.begin * elem, theirs.size() * elem);
      }
      h.gathered[me].value.store(base + ++gathered, std::memory_order_release);
    }
    publish();
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
