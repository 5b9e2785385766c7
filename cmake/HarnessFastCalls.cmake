# Code generation for the library that counts, which runs on every op, allocation and event of a
# measured window. Included by the C++ project and by the Python module's own build, so that both
# libraries are the same code.
#
# The library is a shared library. GCC assumes by default that any of its functions may be
# replaced at load time (ELF interposition), so it neither inlines them nor calls them directly
# from within the library: every counted event paid calls through the PLT. Clang assumes this
# already. Every target, so that the precompiled header they share keeps one set of flags.
add_compile_options($<$<CXX_COMPILER_ID:GNU>:-fno-semantic-interposition>)
# Thread-locals (the open phase, the code site, the account memory is charged to, the CPU aliases)
# are read on every counted event and every allocation, the CPU's too. In a shared library the
# default TLS model calls __tls_get_addr for each (11 instructions and a call, under callgrind);
# with TLS descriptors (gnu2) a read is a call to _dl_tlsdesc_return (2 instructions) once the
# library's block is static, as glibc makes it for a library loaded with the program or dlopen'ed
# by Python. Not under sanitizers: ASan finds a thread's dynamic TLS by intercepting
# __tls_get_addr.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND
   NOT HARNESS_SANITIZERS)
  add_compile_options(-mtls-dialect=gnu2)
endif()
# -fno-semantic-interposition binds a call within one compiled file; a call to a function of
# another file of the library still went through the PLT (an indirect jump through a stub in a
# section of its own, cold between two kernels): the hot path crosses files on every op
# (the unboxed ops -> the alias cache -> the memory ledger -> the collector). The linker binds
# them directly with -Bsymbolic-functions. Functions only: data (a singleton, a static local of an
# inline function) keeps one definition in the process.
function(harness_bind_own_functions target)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${target} PRIVATE -Wl,-Bsymbolic-functions)
  endif()
endfunction()
