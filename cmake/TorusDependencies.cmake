# Every dependency comes from a Debian package (scripts/lib.sh installs them) or /usr/local/cuda; on a machine
# without Debian packages, from the prefix of scripts/gpu-prefix.sh (CMAKE_PREFIX_PATH, set by scripts/lib.sh).
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(yaml-cpp REQUIRED)          # target: yaml-cpp
find_package(nlohmann_json 3.11 REQUIRED) # target: nlohmann_json::nlohmann_json
if(TORUS_WITH_OPERATOR)
  find_package(cpprestsdk REQUIRED)      # target: cpprestsdk::cpprest
endif()
find_package(Boost 1.74 REQUIRED)        # headers: Asio/Beast for the test API server
# oneDNN (target DNNL::dnnl): Debian's libdnnl-dev 2.6.3 unless TORUS_ONEDNN_ROOT names a prefix holding oneDNN 3.x
# (scripts/lib.sh's torus_install_onednn unpacks the pinned PyPI wheels into .tools/onednn-VERSION/). The binaries
# then find that libdnnl.so.3 through their build-tree RPATH, with no LD_LIBRARY_PATH. The CPU engine compiles
# against both APIs (DNNL_VERSION_MAJOR in worker/backend/cpu/); docs/building.md says which is faster where.
set(TORUS_ONEDNN_ROOT "" CACHE PATH "Prefix with oneDNN 3.x (include/, lib/cmake/dnnl/); empty: the system's oneDNN")
if(TORUS_ONEDNN_ROOT)
  find_package(dnnl 3 REQUIRED CONFIG PATHS "${TORUS_ONEDNN_ROOT}" NO_DEFAULT_PATH)
else()
  find_package(dnnl REQUIRED)
endif()
message(STATUS "Torus: oneDNN ${dnnl_VERSION} (${dnnl_DIR})")
find_package(Gloo REQUIRED)              # target: gloo
find_package(OpenMP REQUIRED)
find_package(JPEG REQUIRED)              # libjpeg-turbo
if(TORUS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

set(TORUS_HAVE_CUDA OFF)
if(TORUS_WITH_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures")
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    # CMake 3.25 predates nvcc 13 and does not know its C++20 flag; tell it.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    # The versioned names: the pip wheels of cuDNN and NCCL (next to PyTorch) ship no unversioned .so.
    find_library(TORUS_CUDNN_LIB NAMES cudnn libcudnn.so.9 HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_library(TORUS_NCCL_LIB NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(TORUS_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_path(TORUS_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(TORUS_CUDNN_LIB AND TORUS_NCCL_LIB AND TORUS_CUDNN_INCLUDE AND TORUS_NCCL_INCLUDE)
      set(TORUS_HAVE_CUDA ON)
    else()
      message(STATUS "Torus: CUDA compiler found but cuDNN or NCCL missing; CUDA backend disabled")
    endif()
  else()
    message(STATUS "Torus: no CUDA compiler; CUDA backend disabled")
  endif()
endif()
message(STATUS "Torus: CUDA backend ${TORUS_HAVE_CUDA}")
