# fatpack_add_kernels(): compile CUDA kernels for several GPU architectures, pack them into a fatpack
# package and link the package into a target (docs/cmake.md has every argument).
#
#   fatpack_add_kernels(app
#     NAME        kernels                  # the package name the runtime looks up (default: the target)
#     SOURCES     a.cu b.cu                # one module per source, named after the file (up to the first '.')
#     CUDA_ARCHITECTURES 75-real 80-real 90-real 120-virtual
#     NVCC_OPTIONS -O3 --use_fast_math)     # -rdc=true: separate compilation, all sources one module
#                                            # (MODULE, default NAME), device-linked per architecture
#   target_link_libraries(app PRIVATE fatpack::runtime)
#
# How it builds (and why):
#  - one custom command per (source, architecture): `nvcc -cubin -arch=sm_XY` or `nvcc -ptx
#    -arch=compute_XY`, each with an nvcc depfile, so Ninja/make run them in parallel and an edit to one
#    .cu (or a header it includes) rebuilds only its own outputs;
#  - `fatpack pack` makes the package and `fatpack embed` a C++ file that .incbin-s it; the fatpack tool
#    rewrites its output only when the content changes, and CMake's Ninja generator marks custom
#    commands restat, so an edit that leaves the package's bytes unchanged stops there;
#  - the generated C++ file is added to <target> itself; for a static library, every link that uses it
#    gets `-u <the record's symbol>` (an INTERFACE link option), so the archive member is kept. It is C++ rather than a `.S` so a project that enables only CXX can use it, and it
#    registers the package from a constructor, so a shared library carries its own kernels;
#  - nvcc is driven directly, so the consumer's project need not enable the CUDA language (and when it
#    does, CMAKE_CUDA_COMPILER and CMAKE_CUDA_HOST_COMPILER are used).
# CMake 3.25 has no CUDA_CUBIN_COMPILATION, and its CMAKE_CUDA_ARCHITECTURES_ALL table is stale for
# CUDA 13, so `all`/`all-major` are expanded from `nvcc --list-gpu-code` here.
include_guard(GLOBAL)
# Functions keep the policies in force where they are defined: DEPFILE paths made relative for
# Ninja (CMP0116) even in a project whose cmake_minimum_required is older than 3.20, where an
# absolute depfile target never matched Ninja's relative output and every build ran nvcc again.
cmake_policy(PUSH)
if(POLICY CMP0116)
  cmake_policy(SET CMP0116 NEW)
endif()

# The documented default when neither CUDA_ARCHITECTURES, FATPACK_CUDA_ARCHITECTURES nor a
# user-set CMAKE_CUDA_ARCHITECTURES says otherwise: SASS for the oldest and every X0 architecture the
# toolkit knows, plus PTX of the highest X0 one for GPUs newer than the toolkit (nvcc's own
# -arch=all-major). SASS for an X0 architecture runs on every X.Y GPU of the same major.
# (Functions, not variables, hold such data: functions are global, variables are per directory.)
function(_fatpack_default_architectures out_var)
  set(${out_var} "all-major" PARENT_SCOPE)
endfunction()

# Which CUDA toolkits support an architecture this toolkit lacks, for the configure-time error.
# Source: the CUDA toolkit release notes.
function(_fatpack_arch_hint arch out_var)
  set(since_6.5 50 52)
  set(since_7.0 53)
  set(since_8.0 60 61 62)
  set(since_9.0 70)
  set(since_10.0 72 75)
  set(since_11.0 80)
  set(since_11.1 86)
  set(since_11.4 87)
  set(since_11.8 89 90)
  set(since_12.8 100 101 120)
  set(since_12.9 103 121)
  set(since_13.0 88 110)
  set(hint "no CUDA toolkit fatpack knows of supports it; a newer one may")
  foreach(v 6.5 7.0 8.0 9.0 10.0 11.0 11.1 11.4 11.8 12.8 12.9 13.0)
    if(arch IN_LIST since_${v})
      set(hint "it needs CUDA ${v} or newer")
    endif()
  endforeach()
  if(arch MATCHES "^(30|32|35|37)$")
    set(hint "CUDA 11.8 was the last toolkit to support it")
  elseif(arch MATCHES "^(50|52|53|60|61|62|70|72)$")
    set(hint "CUDA 12.9 was the last toolkit to support it")
  elseif(arch STREQUAL "101")
    set(hint "CUDA 12.8-12.9 call it sm_101; CUDA 13.0 renamed it sm_110")
  endif()
  set(${out_var} "${hint}" PARENT_SCOPE)
endfunction()

# nvcc: the CUDA compiler of a project that enabled CUDA, else FATPACK_NVCC, else FindCUDAToolkit's.
function(_fatpack_find_nvcc out_var)
  if(FATPACK_NVCC)
    set(nvcc "${FATPACK_NVCC}")
  elseif(CMAKE_CUDA_COMPILER AND CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA")
    set(nvcc "${CMAKE_CUDA_COMPILER}")
  else()
    if(NOT CUDAToolkit_NVCC_EXECUTABLE)
      find_package(CUDAToolkit QUIET)
    endif()
    if(CUDAToolkit_NVCC_EXECUTABLE AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
      set(nvcc "${CUDAToolkit_NVCC_EXECUTABLE}")
    else()
      find_program(FATPACK_NVCC_FOUND nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda PATH_SUFFIXES bin)
      set(nvcc "${FATPACK_NVCC_FOUND}")
    endif()
  endif()
  if(NOT nvcc OR NOT EXISTS "${nvcc}")
    if(FATPACK_NVCC)
      set(why " (FATPACK_NVCC=${FATPACK_NVCC} does not exist)")
    else()
      set(why " (not the CUDA compiler of this project, not found by FindCUDAToolkit, not on PATH)")
    endif()
    message(FATAL_ERROR
      "fatpack_add_kernels: nvcc not found${why}. fatpack compiles kernels with the CUDA Toolkit's nvcc: "
      "install the toolkit and put nvcc on PATH, or pass -DFATPACK_NVCC=/path/to/nvcc "
      "(or -DCUDAToolkit_ROOT=/path/to/cuda).")
  endif()
  set(${out_var} "${nvcc}" PARENT_SCOPE)
endfunction()

# What this nvcc supports (`--list-gpu-code`) and its release, asked once per nvcc path.
function(_fatpack_nvcc_facts nvcc archs_var version_var)
  string(MAKE_C_IDENTIFIER "${nvcc}" key)
  get_property(known GLOBAL PROPERTY _FATPACK_NVCC_ARCHS_${key} SET)
  if(NOT known)
    execute_process(COMMAND "${nvcc}" --list-gpu-code
      OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "fatpack_add_kernels: '${nvcc} --list-gpu-code' failed (${rc}): ${err}")
    endif()
    string(REGEX MATCHALL "sm_[0-9]+" codes "${out}")
    list(TRANSFORM codes REPLACE "^sm_" "")
    if(NOT codes)
      message(FATAL_ERROR "fatpack_add_kernels: '${nvcc} --list-gpu-code' printed no architectures: ${out}")
    endif()
    execute_process(COMMAND "${nvcc}" --version OUTPUT_VARIABLE out RESULT_VARIABLE rc)
    set(version "?")
    if(rc EQUAL 0 AND out MATCHES "release ([0-9]+\\.[0-9]+)")
      set(version "${CMAKE_MATCH_1}")
    endif()
    set_property(GLOBAL PROPERTY _FATPACK_NVCC_ARCHS_${key} "${codes}")
    set_property(GLOBAL PROPERTY _FATPACK_NVCC_VERSION_${key} "${version}")
  endif()
  get_property(codes GLOBAL PROPERTY _FATPACK_NVCC_ARCHS_${key})
  get_property(version GLOBAL PROPERTY _FATPACK_NVCC_VERSION_${key})
  set(${archs_var} "${codes}" PARENT_SCOPE)
  set(${version_var} "${version}" PARENT_SCOPE)
endfunction()

# Whether the user chose CMAKE_CUDA_ARCHITECTURES. CMake 3.25 stores nvcc's default (75) in the cache
# by itself when the CUDA language is enabled, with the help string "CUDA architectures"; that one
# does not count. A -D on the command line, a normal variable or the CUDAARCHS environment does.
function(_fatpack_user_cuda_architectures out_var)
  set(result "")
  if(DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "")
    set(result "${CMAKE_CUDA_ARCHITECTURES}")
    if(DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES} AND "$CACHE{CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${CMAKE_CUDA_ARCHITECTURES}")
      get_property(help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
      if(help STREQUAL "CUDA architectures" AND "$ENV{CUDAARCHS}" STREQUAL "")
        set(result "")  # CMake's automatic default
      endif()
    endif()
    if(result MATCHES "^(OFF|FALSE|NO|0)$")
      set(result "")  # CMake's "pass no architecture flags": not a choice of architectures
    endif()
  endif()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

# `native`: the compute capabilities of the GPUs present at configure time ("86;90"), as nvidia-smi
# reports them (`--query-gpu=compute_cap`, the query nvcc's -arch=native answers from the driver).
# FATPACK_NVIDIA_SMI names the program (an nvidia-smi not on PATH; a stand-in for tests). No GPU, no
# nvidia-smi or one that fails: a configure error, since a package for no GPU is not what was meant.
function(_fatpack_native_architectures out_var)
  get_property(known GLOBAL PROPERTY _FATPACK_NATIVE_ARCHS SET)
  if(known)
    get_property(archs GLOBAL PROPERTY _FATPACK_NATIVE_ARCHS)
    set(${out_var} "${archs}" PARENT_SCOPE)
    return()
  endif()
  if(FATPACK_NVIDIA_SMI)
    set(smi "${FATPACK_NVIDIA_SMI}")
  else()
    find_program(FATPACK_NVIDIA_SMI_FOUND nvidia-smi)
    set(smi "${FATPACK_NVIDIA_SMI_FOUND}")
  endif()
  set(why "")
  set(archs "")
  if(NOT smi OR NOT EXISTS "${smi}")
    if(FATPACK_NVIDIA_SMI)
      set(why "FATPACK_NVIDIA_SMI=${FATPACK_NVIDIA_SMI} does not exist")
    else()
      set(why "nvidia-smi is not on PATH (no NVIDIA driver on this machine?)")
    endif()
  else()
    execute_process(COMMAND "${smi}" --query-gpu=compute_cap --format=csv,noheader
      OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
    if(NOT rc EQUAL 0)
      string(STRIP "${out} ${err}" said)
      set(why "'${smi} --query-gpu=compute_cap --format=csv,noheader' failed (${rc}): ${said}")
    else()
      string(REGEX MATCHALL "[0-9]+\\.[0-9]" caps "${out}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" cc "${cap}")
        list(APPEND archs "${cc}")
      endforeach()
      list(REMOVE_DUPLICATES archs)
      list(SORT archs COMPARE NATURAL)
      if(NOT archs)
        string(STRIP "${out}" said)
        set(why "'${smi} --query-gpu=compute_cap --format=csv,noheader' listed no GPU ('${said}')")
      endif()
    endif()
  endif()
  if(why)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): CUDA_ARCHITECTURES 'native'${arch_source} means the GPUs of this "
      "machine, and none was found: ${why}. Name the architectures (e.g. 75-real 90-real 120-virtual), or set "
      "FATPACK_NVIDIA_SMI to an nvidia-smi that sees the GPUs.")
  endif()
  set_property(GLOBAL PROPERTY _FATPACK_NATIVE_ARCHS "${archs}")
  set(${out_var} "${archs}" PARENT_SCOPE)
endfunction()

# CMake CUDA_ARCHITECTURES syntax -> targets "sm_80", "compute_90", "sm_90a", "compute_100f".
function(_fatpack_expand_archs spec nvcc_archs nvcc_version out_var)
  set(out "")
  set(highest_major 0)
  list(SORT nvcc_archs COMPARE NATURAL)
  list(GET nvcc_archs 0 lowest)
  foreach(a IN LISTS nvcc_archs)
    math(EXPR m "${a} % 10")
    if(m EQUAL 0 AND a GREATER highest_major)
      set(highest_major ${a})
    endif()
  endforeach()
  string(REPLACE "," ";" spec "${spec}")
  string(REPLACE " " ";" spec "${spec}")
  foreach(item IN LISTS spec)
    if(item STREQUAL "")
      continue()
    endif()
    if(item STREQUAL "all" OR item STREQUAL "all-major")
      foreach(a IN LISTS nvcc_archs)
        math(EXPR m "${a} % 10")
        if(item STREQUAL "all" OR m EQUAL 0 OR a EQUAL lowest)
          list(APPEND out sm_${a})
        endif()
      endforeach()
      list(APPEND out compute_${highest_major})
      continue()
    endif()
    if(item STREQUAL "native")
      # As nvcc -arch=native: SASS for each GPU present, no PTX.
      _fatpack_native_architectures(native_archs)
      foreach(a IN LISTS native_archs)
        if(NOT a IN_LIST nvcc_archs)
          string(REPLACE ";" " " have "${nvcc_archs}")
          message(FATAL_ERROR "fatpack_add_kernels(${target}): CUDA_ARCHITECTURES 'native'${arch_source}: this machine's GPU "
            "sm_${a} is not supported by this CUDA toolkit (CUDA ${nvcc_version}, which supports ${have}).")
        endif()
        list(APPEND out sm_${a})
      endforeach()
      continue()
    endif()
    # Parsed here, not by CMake: CMake before 3.31.8 refuses the `f` suffix in its own checks.
    if(NOT item MATCHES "^([0-9]+)([af]?)(-real|-virtual)?$")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): invalid CUDA architecture '${item}'${arch_source} (expected e.g. 90, "
        "90-real, 120-virtual, 90a-real, 100f, all, all-major, native).")
    endif()
    set(arch "${CMAKE_MATCH_1}")
    set(variant "${CMAKE_MATCH_2}")
    set(kind "${CMAKE_MATCH_3}")
    if(variant STREQUAL "a" AND arch LESS 90)
      message(FATAL_ERROR "fatpack_add_kernels(${target}): invalid CUDA architecture '${item}'${arch_source}: arch-specific "
        "variants (a) exist from sm_90 on.")
    endif()
    if(variant STREQUAL "f" AND arch LESS 100)
      message(FATAL_ERROR "fatpack_add_kernels(${target}): invalid CUDA architecture '${item}'${arch_source}: family-specific "
        "variants (f) exist from sm_100 on.")
    endif()
    if(NOT arch IN_LIST nvcc_archs)
      string(REPLACE ";" " " have "${nvcc_archs}")
      _fatpack_arch_hint("${arch}" hint)
      message(FATAL_ERROR "fatpack_add_kernels(${target}): CUDA architecture '${item}'${arch_source} is not supported by this CUDA "
        "toolkit (CUDA ${nvcc_version}, which supports ${have}): ${hint}.")
    endif()
    if(NOT kind STREQUAL "-virtual")
      list(APPEND out sm_${arch}${variant})
    endif()
    if(NOT kind STREQUAL "-real")
      list(APPEND out compute_${arch}${variant})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES out)
  if(NOT out)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): CUDA_ARCHITECTURES${arch_source} is empty.")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# The fatpack tool: FATPACK_EXECUTABLE (e.g. for cross builds), else the fatpack::fatpack target,
# built in this tree (add_subdirectory / FetchContent) or imported (find_package).
# A path as the target of a Make-syntax dependency file (nvcc -MT writes it as given): spaces, '#'
# and '$' escaped the way Ninja's and Make's depfile readers undo. Unescaped, "my kernel.cubin" read
# as the two targets "my" and "kernel.cubin", Ninja never matched the output, and every build ran
# nvcc again for it.
function(_fatpack_depfile_target path out_var)
  string(REPLACE "$" "$$" path "${path}")
  string(REPLACE "#" "\\#" path "${path}")
  string(REPLACE " " "\\ " path "${path}")
  set(${out_var} "${path}" PARENT_SCOPE)
endfunction()

function(_fatpack_tool command_var depends_var)
  if(FATPACK_EXECUTABLE)
    set(${command_var} "${FATPACK_EXECUTABLE}" PARENT_SCOPE)
    set(${depends_var} "${FATPACK_EXECUTABLE}" PARENT_SCOPE)
    return()
  endif()
  if(NOT TARGET fatpack::fatpack)
    message(FATAL_ERROR "fatpack_add_kernels: the fatpack tool is not available: call "
      "find_package(fatpack CONFIG REQUIRED), add_subdirectory(<fatpack source>) or FetchContent first, "
      "or set FATPACK_EXECUTABLE.")
  endif()
  get_target_property(aliased fatpack::fatpack ALIASED_TARGET)
  if(aliased)
    # Built here: naming the real target gives a file-level dependency, so a rebuilt tool reruns packing.
    set(${command_var} "$<TARGET_FILE:${aliased}>" PARENT_SCOPE)
    set(${depends_var} "${aliased}" PARENT_SCOPE)
  else()
    set(${command_var} "$<TARGET_FILE:fatpack::fatpack>" PARENT_SCOPE)
    set(${depends_var} "$<TARGET_FILE:fatpack::fatpack>" PARENT_SCOPE)
  endif()
endfunction()

# A package or module name (NAME, MODULE): one safe word, as the tool and the runtime expect.
# The target's CUDA_ARCHITECTURES property when the project set it ("" otherwise): CMake initialises
# it from CMAKE_CUDA_ARCHITECTURES when the target is made, and that copy is the variable's choice.
function(_fatpack_own_architectures target out_var)
  get_target_property(own ${target} CUDA_ARCHITECTURES)
  if(NOT own OR own MATCHES "^(OFF|FALSE|NO|0)$" OR
     (DEFINED CMAKE_CUDA_ARCHITECTURES AND "${own}" STREQUAL "${CMAKE_CUDA_ARCHITECTURES}"))
    set(own "")
  endif()
  set(${out_var} "${own}" PARENT_SCOPE)
endfunction()

# Deferred to the end of the calling directory: a CUDA_ARCHITECTURES property set on the target after
# fatpack_add_kernels (which read it at the call) would otherwise be ignored without a word. The raw
# values are compared: a later change of CMAKE_CUDA_ARCHITECTURES alone is no change of the property.
function(_fatpack_check_late_architectures target property_at_call)
  get_target_property(now ${target} CUDA_ARCHITECTURES)
  if(NOT now)
    set(now "")
  endif()
  if(NOT "${now}" STREQUAL "${property_at_call}")
    if(property_at_call STREQUAL "")
      set(was "unset")
    else()
      set(was "'${property_at_call}'")
    endif()
    message(WARNING "fatpack_add_kernels(${target}): the target's CUDA_ARCHITECTURES property was set to '${now}' "
      "after the call, which read it (${was}) and chose its architectures then; '${now}' is not used. Set the "
      "property before fatpack_add_kernels, or pass CUDA_ARCHITECTURES to it.")
  endif()
endfunction()

function(_fatpack_check_name target keyword value)
  if(NOT value MATCHES "^[A-Za-z0-9_.+-]+$")
    message(FATAL_ERROR "fatpack_add_kernels(${target}): ${keyword} '${value}' may use only letters, digits and _ . + -")
  endif()
endfunction()

function(fatpack_add_kernels target)
  set(options "")
  set(one_value NAME MODULE CODEC LEVEL OUTPUT_DIRECTORY PACKAGE_VARIABLE)
  set(multi_value SOURCES CUDA_ARCHITECTURES NVCC_OPTIONS INCLUDE_DIRECTORIES COMPILE_DEFINITIONS)
  cmake_parse_arguments(PARSE_ARGV 1 arg "${options}" "${one_value}" "${multi_value}")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): unknown arguments: ${arg_UNPARSED_ARGUMENTS} "
      "(expected NAME, MODULE, SOURCES, CUDA_ARCHITECTURES, NVCC_OPTIONS, INCLUDE_DIRECTORIES, COMPILE_DEFINITIONS, "
      "CODEC, LEVEL, OUTPUT_DIRECTORY, PACKAGE_VARIABLE; see docs/cmake.md)")
  endif()
  # NAME "" (a variable left empty, quoted): cmake_parse_arguments leaves arg_NAME unset and does not
  # report it missing, so the target's name was used silently. Any one-value keyword followed by an
  # empty argument is an error.
  math(EXPR last_arg "${ARGC} - 2")
  if(last_arg GREATER_EQUAL 1)
    foreach(i RANGE 1 ${last_arg})
      math(EXPR next "${i} + 1")
      if("${ARGV${i}}" IN_LIST one_value AND "${ARGV${next}}" STREQUAL "" AND NOT DEFINED arg_${ARGV${i}})
        message(FATAL_ERROR "fatpack_add_kernels(${target}): ${ARGV${i}} is empty (a variable left unset?); give a "
          "value or leave ${ARGV${i}} out.")
      endif()
    endforeach()
  endif()
  foreach(kw IN LISTS arg_KEYWORDS_MISSING_VALUES)
    if(NOT kw STREQUAL "NVCC_OPTIONS" AND NOT kw STREQUAL "INCLUDE_DIRECTORIES" AND NOT kw STREQUAL "COMPILE_DEFINITIONS")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): ${kw} needs a value.")
    endif()
  endforeach()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "fatpack_add_kernels: '${target}' is not a target (create it with add_executable or "
      "add_library first).")
  endif()
  get_target_property(type ${target} TYPE)
  get_target_property(imported ${target} IMPORTED)
  if(imported OR type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
    message(FATAL_ERROR "fatpack_add_kernels: '${target}' (${type}) cannot carry sources; use an executable, "
      "shared, module, object or static library.")
  endif()
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): SOURCES is required (the .cu files to compile).")
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CXX" IN_LIST languages)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): the CXX language is not enabled. The generated "
      "embedding source is C++ (and fatpack::runtime a C++ library): use project(... LANGUAGES C CXX) or "
      "enable_language(CXX).")
  endif()

  set(name "${target}")
  if(DEFINED arg_NAME)
    set(name "${arg_NAME}")
  endif()
  _fatpack_check_name("${target}" NAME "${name}")
  get_target_property(used ${target} FATPACK_PACKAGES)
  if(used AND name IN_LIST used)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): package '${name}' is already added to this target; "
      "give each call its own NAME.")
  endif()
  set(codec_args "")
  if(DEFINED arg_CODEC)
    if(NOT arg_CODEC MATCHES "^(lz4|zstd|none)$")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): CODEC must be lz4, zstd or none, not '${arg_CODEC}'.")
    endif()
    list(APPEND codec_args --codec ${arg_CODEC})
  endif()
  if(DEFINED arg_LEVEL)
    if(NOT arg_LEVEL MATCHES "^[0-9]+$")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): LEVEL must be a number, not '${arg_LEVEL}'.")
    endif()
    list(APPEND codec_args --level ${arg_LEVEL})
  endif()
  # -rdc=true: separate compilation (docs/cmake.md): every source into one module, device-linked.
  set(rdc FALSE)
  set(lto FALSE)
  set(nvcc_options "")
  foreach(opt IN LISTS arg_NVCC_OPTIONS)
    if(opt MATCHES "^(-arch|--gpu-architecture|-gencode|--generate-code|-code|--gpu-code)([= ]|$)")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): NVCC_OPTIONS must not choose architectures "
        "('${opt}'); use CUDA_ARCHITECTURES.")
    endif()
    if(opt MATCHES "^(-rdc=true|--relocatable-device-code=true)$")
      set(rdc TRUE)
      continue()
    endif()
    if(opt MATCHES "^(-dlto|--dlink-time-opt)$")
      set(lto TRUE)
      continue()
    endif()
    if(opt MATCHES "^(-rdc=false|--relocatable-device-code=false)$")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): NVCC_OPTIONS '${opt}' is not supported: separate "
        "compilation is -rdc=true.")
    endif()
    if(opt MATCHES "^(-c|--compile|-cubin|-ptx|-fatbin|-o|--output-file|-rdc|--relocatable-device-code.*|-dc|--device-c|-dlink|--device-link)$")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): NVCC_OPTIONS must not set the compilation mode or "
        "output ('${opt}'): fatpack compiles one cubin or PTX per architecture (for separate compilation "
        "write -rdc=true).")
    endif()
    list(APPEND nvcc_options "${opt}")
  endforeach()
  if(lto AND NOT rdc)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): NVCC_OPTIONS -dlto needs -rdc=true too (LTO-IR is "
      "packed for separate compilation).")
  endif()
  if(DEFINED arg_MODULE AND NOT rdc)
    message(FATAL_ERROR "fatpack_add_kernels(${target}): MODULE needs NVCC_OPTIONS -rdc=true (without it each "
      "source is its own module, named after the file).")
  endif()

  # Architectures: the argument, else the target's own CUDA_ARCHITECTURES property, else
  # FATPACK_CUDA_ARCHITECTURES, else a user-set CMAKE_CUDA_ARCHITECTURES, else the documented default.
  _fatpack_find_nvcc(nvcc)
  _fatpack_nvcc_facts("${nvcc}" nvcc_archs nvcc_version)
  # The property counts when the project set it on the target: CMake initialises it from
  # CMAKE_CUDA_ARCHITECTURES when the target is made, and that copy is the variable's choice, ranked
  # below (where CMake's own automatic default does not count).
  _fatpack_own_architectures(${target} own_archs)
  if(NOT arg_CUDA_ARCHITECTURES)
    # The property is read now; one set after this call would be ignored without a word.
    get_target_property(property_now ${target} CUDA_ARCHITECTURES)
    if(NOT property_now)
      set(property_now "")
    endif()
    cmake_language(EVAL CODE
      "cmake_language(DEFER CALL _fatpack_check_late_architectures [[${target}]] [[${property_now}]])")
  endif()
  if(own_archs MATCHES "\\$<")
    message(FATAL_ERROR "fatpack_add_kernels(${target}): the target's CUDA_ARCHITECTURES '${own_archs}' holds a "
      "generator expression, which the architectures chosen at configure time cannot use; pass CUDA_ARCHITECTURES.")
  endif()
  # (_fatpack_expand_archs names the source in its errors.)
  if(arg_CUDA_ARCHITECTURES)
    set(spec "${arg_CUDA_ARCHITECTURES}")
    set(arch_source "")
  elseif(own_archs)
    set(spec "${own_archs}")
    set(arch_source " (from the CUDA_ARCHITECTURES property of target '${target}')")
  elseif(FATPACK_CUDA_ARCHITECTURES)
    set(spec "${FATPACK_CUDA_ARCHITECTURES}")
    set(arch_source " (from FATPACK_CUDA_ARCHITECTURES)")
  else()
    _fatpack_user_cuda_architectures(spec)
    set(arch_source " (from CMAKE_CUDA_ARCHITECTURES; CUDA_ARCHITECTURES of this call would override it)")
    if(spec STREQUAL "")
      _fatpack_default_architectures(spec)
      set(arch_source "")
    endif()
  endif()
  _fatpack_expand_archs("${spec}" "${nvcc_archs}" "${nvcc_version}" gpu_targets)
  string(REPLACE ";" " " shown_targets "${gpu_targets}")
  message(VERBOSE "fatpack_add_kernels(${target}): package '${name}' for ${shown_targets}${arch_source}")

  _fatpack_tool(tool tool_depends)

  if(DEFINED arg_OUTPUT_DIRECTORY)
    get_filename_component(out_dir "${arg_OUTPUT_DIRECTORY}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  else()
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/fatpack/${target}/${name}")
  endif()
  file(MAKE_DIRECTORY "${out_dir}")

  # Flags every nvcc call of this package gets.
  set(nvcc_flags "")
  if(CMAKE_CUDA_HOST_COMPILER)
    list(APPEND nvcc_flags -ccbin "${CMAKE_CUDA_HOST_COMPILER}")
  endif()
  foreach(dir IN LISTS arg_INCLUDE_DIRECTORIES)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND nvcc_flags "-I${dir}")
  endforeach()
  foreach(def IN LISTS arg_COMPILE_DEFINITIONS)
    list(APPEND nvcc_flags "-D${def}")
  endforeach()
  list(APPEND nvcc_flags ${nvcc_options})
  if(rdc)
    list(APPEND nvcc_flags -rdc=true)
    set(rdc_module "${name}")
    if(DEFINED arg_MODULE)
      set(rdc_module "${arg_MODULE}")
    endif()
    _fatpack_check_name("${target}" MODULE "${rdc_module}")
  endif()

  set(inputs "")
  foreach(gpu IN LISTS gpu_targets)
    set(rdc_cubins_${gpu} "")
    set(lto_parts_${gpu} "")
  endforeach()
  set(lto_made "")
  set(modules "")
  foreach(src IN LISTS arg_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(base "${src}" NAME)
    if(NOT EXISTS "${src}" AND base MATCHES "^[A-Z][A-Z_]+$")
      # cmake_parse_arguments puts a misspelt keyword after SOURCES into SOURCES.
      message(FATAL_ERROR "fatpack_add_kernels(${target}): unknown arguments: ${base} (found among SOURCES; "
        "expected NAME, MODULE, SOURCES, CUDA_ARCHITECTURES, NVCC_OPTIONS, INCLUDE_DIRECTORIES, COMPILE_DEFINITIONS, "
        "CODEC, LEVEL, OUTPUT_DIRECTORY, PACKAGE_VARIABLE; see docs/cmake.md)")
    endif()
    if(NOT EXISTS "${src}")
      message(FATAL_ERROR "fatpack_add_kernels(${target}): source '${src}' does not exist.")
    endif()
    # The module name is the file name up to the first '.', as `fatpack pack` and `fatpack build` name it.
    get_filename_component(module "${src}" NAME_WE)
    if(module IN_LIST modules AND rdc)
      # With -rdc=true the sources make one module, but their relocatable objects are named after
      # the file in one output directory.
      message(FATAL_ERROR "fatpack_add_kernels(${target}): two sources are named '${module}' (up to the first "
        "'.'); with -rdc=true each source's relocatable code is named after its file in one output directory, "
        "so the names must differ: rename one.")
    elseif(module IN_LIST modules)
      message(FATAL_ERROR "fatpack_add_kernels(${target}): two sources make module '${module}' (a module is "
        "named after its file up to the first '.'); rename one or put it in another package.")
    endif()
    list(APPEND modules "${module}")
    foreach(gpu IN LISTS gpu_targets)
      if(gpu MATCHES "^sm_" AND rdc)
        # Relocatable: linked with the other sources' below, never packed as it is.
        set(out "${out_dir}/${module}.${gpu}.rdc.cubin")
        set(mode -cubin)
        set(what "relocatable SASS")
        list(APPEND rdc_cubins_${gpu} "${out}")
      elseif(gpu MATCHES "^sm_")
        set(out "${out_dir}/${module}.${gpu}.cubin")
        set(mode -cubin)
        set(what "SASS")
      else()
        set(out "${out_dir}/${module}.${gpu}.ptx")
        set(mode -ptx)
        set(what "PTX")
      endif()
      file(RELATIVE_PATH shown "${CMAKE_BINARY_DIR}" "${out}")
      _fatpack_depfile_target("${out}" mt)
      add_custom_command(OUTPUT "${out}"
        COMMAND "${nvcc}" ${mode} -arch=${gpu} ${nvcc_flags} -MD -MT "${mt}" -MF "${out}.d" -o "${out}" "${src}"
        DEPENDS "${src}"
        DEPFILE "${out}.d"
        COMMENT "fatpack: nvcc ${module} -> ${gpu} ${what} (${shown})"
        VERBATIM)
      if(NOT (gpu MATCHES "^sm_" AND rdc))
        list(APPEND inputs "${out}")
      endif()
      if(lto)
        # -dlto: this source's LTO-IR for the arch (once for sm_XY and compute_XY), named
        # STEM.lto_XY.ltoir. Beside a PTX target it is packed (`fatpack pack` takes its target from the
        # name and its kernels from STEM.compute_XY.ptx, docs/cli.md "pack"); for a SASS target it is
        # linked by `fatpack link-lto` below.
        string(REGEX REPLACE "^(compute|sm)_" "lto_" lto_gpu "${gpu}")
        string(REGEX REPLACE "^compute_" "sm_" sm_gpu "${gpu}")
        set(lto_out "${out_dir}/${module}.${lto_gpu}.ltoir")
        if(NOT lto_out IN_LIST lto_made)
          list(APPEND lto_made "${lto_out}")
          file(RELATIVE_PATH shown "${CMAKE_BINARY_DIR}" "${lto_out}")
          _fatpack_depfile_target("${lto_out}" mt)
          add_custom_command(OUTPUT "${lto_out}"
            COMMAND "${nvcc}" -ltoir -dlto -arch=${sm_gpu} ${nvcc_flags} -MD -MT "${mt}" -MF "${lto_out}.d" -o "${lto_out}" "${src}"
            DEPENDS "${src}"
            DEPFILE "${lto_out}.d"
            COMMENT "fatpack: nvcc -dlto ${module} -> ${lto_gpu} LTO-IR (${shown})"
            VERBATIM)
        endif()
        if(gpu MATCHES "^compute_")
          list(APPEND inputs "${lto_out}")
        else()
          list(APPEND lto_parts_${gpu} "${lto_out}")
        endif()
      endif()
    endforeach()
  endforeach()

  # Separate compilation: one device link per SASS target (nvcc -dlink -cubin) gives a complete
  # cubin; the PTX of every source is packed as one link group (`fatpack pack --link`), which the
  # runtime's JIT links (docs/format.md).
  set(pack_module_args "")
  if(rdc)
    set(pack_module_args --module "${rdc_module}" --link)
    foreach(gpu IN LISTS gpu_targets)
      if(NOT gpu MATCHES "^sm_")
        continue()
      endif()
      set(out "${out_dir}/${rdc_module}.${gpu}.linked.cubin")
      set(dlink_out "${out}")
      if(lto)
        set(dlink_out "${out_dir}/${rdc_module}.${gpu}.dlink.cubin")
      endif()
      file(RELATIVE_PATH shown "${CMAKE_BINARY_DIR}" "${dlink_out}")
      add_custom_command(OUTPUT "${dlink_out}"
        COMMAND "${nvcc}" -dlink -cubin -arch=${gpu} -o "${dlink_out}" ${rdc_cubins_${gpu}}
        DEPENDS ${rdc_cubins_${gpu}}
        COMMENT "fatpack: nvcc -dlink ${rdc_module} -> ${gpu} SASS (${shown})"
        VERBATIM)
      if(lto)
        # -dlto: the SASS is nvJitLink's -lto link of the sources' LTO-IR, as `fatpack build` makes it;
        # the device link above where nvJitLink cannot be loaded or cannot link (with a warning).
        file(RELATIVE_PATH shown "${CMAKE_BINARY_DIR}" "${out}")
        add_custom_command(OUTPUT "${out}"
          COMMAND ${tool} link-lto -o "${out}" --arch ${gpu} --fallback "${dlink_out}" ${lto_parts_${gpu}} -- ${nvcc_options}
          DEPENDS "${dlink_out}" ${lto_parts_${gpu}} ${tool_depends}
          COMMENT "fatpack: nvJitLink -lto ${rdc_module} -> ${gpu} SASS (${shown})"
          VERBATIM)
      endif()
      list(APPEND inputs "${out}")
    endforeach()
  endif()

  set(package "${out_dir}/${name}.fpk")
  string(MAKE_C_IDENTIFIER "${name}" symbol)
  # The generated file's symbols (`fatpack embed --symbol`): the package name as a C identifier, at
  # most 48 characters of it, and a hash of target and name. Names are outside input: MAKE_C_IDENTIFIER
  # leaves only [A-Za-z0-9_], and the hash keeps names that map to the same identifier ("a-b" and
  # "a_b", or one package name used by two static libraries of one program) from defining one symbol
  # twice. Stable across build trees (no paths in it).
  string(SUBSTRING "${symbol}" 0 48 embed_symbol)
  string(SHA256 embed_hash "${target}\n${name}")
  string(SUBSTRING "${embed_hash}" 0 12 embed_hash)
  set(embed_symbol "${embed_symbol}_${embed_hash}")
  set(embed "${out_dir}/${name}.fatpack.cpp")
  # After `--`: the nvcc options the PTX was compiled with; pack records those its JIT needs
  # (-maxrregcount, -lineinfo, -G, -Xptxas -O<n>) on the PTX entries.
  add_custom_command(OUTPUT "${package}"
    COMMAND ${tool} pack -o "${package}" --name "${name}" ${pack_module_args} ${codec_args} ${inputs} -- ${nvcc_options}
    DEPENDS ${inputs} ${tool_depends}
    COMMENT "fatpack: pack ${name}.fpk (${target})"
    VERBATIM)
  add_custom_command(OUTPUT "${embed}"
    COMMAND ${tool} embed -o "${embed}" --symbol "${embed_symbol}" "${package}"
    DEPENDS "${package}" ${tool_depends}
    COMMENT "fatpack: embed ${name}.fpk (${target})"
    VERBATIM)
  # The commands belong to this directory; <target> may be defined in another one, which would not
  # see them. A custom target here builds the package, and <target> depends on it.
  set(package_target "${target}_fatpack_${symbol}")
  add_custom_target(${package_target} DEPENDS "${embed}")
  add_dependencies(${target} ${package_target})
  # GCC's depfile does not record an .incbin-ed file: name the package explicitly. (The generated
  # file also carries the package's checksum, so it changes whenever the package does.) Set where
  # <target> is defined, since source properties are per directory.
  set_source_files_properties("${embed}" TARGET_DIRECTORY ${target}
    PROPERTIES GENERATED TRUE OBJECT_DEPENDS "${package}")
  target_sources(${target} PRIVATE "${embed}")
  if(type STREQUAL "STATIC_LIBRARY")
    # Nothing references the generated object, so a linker would leave its archive member out. Every
    # link that uses this library (CMake passes INTERFACE_LINK_OPTIONS on through other static
    # libraries, PRIVATE ones too) asks for the member's record symbol as undefined from the start
    # (-u), which pulls the member in; the consumer does nothing. Chosen over an object library or
    # INTERFACE_SOURCES: a link option is a plain string, so it needs no language and survives
    # install(EXPORT) of the library, where a source path would point into this build tree.
    target_link_options(${target} INTERFACE "LINKER:-u,fatpack_pkg_${embed_symbol}_record")
  endif()

  set_property(TARGET ${target} APPEND PROPERTY FATPACK_PACKAGES "${name}")
  set_property(TARGET ${target} APPEND PROPERTY FATPACK_PACKAGE_FILES "${package}")
  if(DEFINED arg_PACKAGE_VARIABLE)
    set(${arg_PACKAGE_VARIABLE} "${package}" PARENT_SCOPE)
  endif()
endfunction()

cmake_policy(POP)
