# shellcheck shell=bash
# Sourced by the CPU benchmarks (time_to_accuracy.sh, train_throughput.sh): which vector ISA both sides run.
#
# Machines differ (AVX-512 or AVX2), and so do the ratios: on AVX2 oneDNN has no Winograd convolutions and half the
# vector width, while PyTorch's small-model overhead stays. CPU_ISA=avx2 makes an AVX-512 machine run what an AVX2
# machine runs, on both sides: oneDNN in torus and in PyTorch (ONEDNN_MAX_CPU_ISA; torus's hand-written kernels follow
# oneDNN's effective ISA) and PyTorch's own ATen kernels (ATEN_CPU_CAPABILITY). ONEDNN_MAX_CPU_ISA=AVX2 alone gets
# ATEN_CPU_CAPABILITY=avx2 too, so PyTorch is never left on wider vectors than torus. The RESULT lines name the ISA
# (isa=...): figures of different ISAs are not to be compared.

# Sets the environment for CPU_ISA (avx2, avx512 or empty: the machine's own) and ISA to what both sides run. Called
# in the benchmark's own shell (not in $(...)), so the exports reach both sides' processes.
bench_cpu_isa() {
  local native=avx2
  if grep -qw avx512f /proc/cpuinfo; then native=avx512; fi
  case "${CPU_ISA:-}" in
    "") ;;
    avx2) export ONEDNN_MAX_CPU_ISA=AVX2 ;;
    avx512)
      if [[ "$native" != avx512 ]]; then
        echo "CPU_ISA=avx512: this CPU has no AVX-512 (/proc/cpuinfo)" >&2
        return 2
      fi
      export ONEDNN_MAX_CPU_ISA=AVX512_CORE
      ;;
    *)
      echo "CPU_ISA: expected avx2, avx512 or nothing (the machine's own), got '$CPU_ISA'" >&2
      return 2
      ;;
  esac
  case "${ONEDNN_MAX_CPU_ISA:-}" in
    "") ISA="$native" ;;
    AVX2 | avx2) ISA=avx2 ;;
    AVX512* | avx512*) ISA=avx512 ;;
    *)
      echo "ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA: the benchmarks compare only avx2 or avx512 runs" >&2
      return 2
      ;;
  esac
  if [[ "$ISA" == avx2 ]]; then export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-avx2}"; fi
}
