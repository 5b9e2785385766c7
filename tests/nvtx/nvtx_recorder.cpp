// An NVTX injection library, loaded the way Nsight Systems is (NVTX_INJECTION64_PATH): it takes
// over the range calls of every domain and writes what a profiler would record to the file named
// by NVTX_RECORD_OUT, one line per call:
//   push <TAB> <domain> <TAB> <message>
//   pop <TAB> <domain>
// (<domain> is "(default)" for the global domain.) Lines are written by the calling thread, in
// order, with its thread id first: "<tid> <TAB> push ...".
// A tool, not an instrumented program: the types and ids only, no NVTX implementation.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

struct Domain {
  std::string name;
};

std::mutex g_mu;
FILE* g_out = nullptr;

void write_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_out == nullptr) return;
  std::fprintf(g_out, "%ld\t%s\n", static_cast<long>(::syscall(SYS_gettid)), line.c_str());
  std::fflush(g_out);
}

std::string domain_name(nvtxDomainHandle_t domain) {
  return domain ? reinterpret_cast<Domain*>(domain)->name : "(default)";
}

std::string message_of(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr) return "";
  switch (attributes->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return attributes->message.ascii;
    default: return "(non-ascii message)";
  }
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new Domain{name ? name : ""});
}

int NVTX_API domain_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  write_line("push\t" + domain_name(domain) + "\t" + message_of(attributes));
  return 0;
}

int NVTX_API domain_pop(nvtxDomainHandle_t domain) {
  write_line("pop\t" + domain_name(domain));
  return 0;
}

int NVTX_API push_a(const char* message) {
  write_line(std::string("push\t(default)\t") + (message ? message : ""));
  return 0;
}

int NVTX_API push_ex(const nvtxEventAttributes_t* attributes) {
  write_line("push\t(default)\t" + message_of(attributes));
  return 0;
}

int NVTX_API pop() {
  write_line("pop\t(default)");
  return 0;
}

template <class F>
bool set(NvtxFunctionTable table, unsigned int size, unsigned int id, F* f) {
  if (table == nullptr || id >= size || table[id] == nullptr) return false;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(f);
  return true;
}

}  // namespace

extern "C" NVTX_DYNAMIC_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  const char* path = std::getenv("NVTX_RECORD_OUT");
  if (path == nullptr || get_table == nullptr) return 0;
  g_out = std::fopen(path, "w");
  if (g_out == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned int core_size = 0, core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) ||
      !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) {
    return 0;
  }
  const bool ok = set(core, core_size, NVTX_CBID_CORE_RangePushA, &push_a) &&
                  set(core, core_size, NVTX_CBID_CORE_RangePushEx, &push_ex) &&
                  set(core, core_size, NVTX_CBID_CORE_RangePop, &pop) &&
                  set(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &domain_create) &&
                  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_push) &&
                  set(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_pop);
  return ok ? 1 : 0;
}
