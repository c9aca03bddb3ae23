// spdlog's out-of-line code, compiled from Debian's headers into the static ddp_static_logging
// library: the same code as libspdlog.so (compiled-library mode, external fmt), for programs that
// must start without loading shared libraries (ddprun). Each -inl.h holds the definitions that
// the compiled-library headers only declare; the sink templates ddp's loggers use are
// instantiated at the end.
#include <spdlog/cfg/helpers-inl.h>
#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks-inl.h>
#include <spdlog/sinks/stdout_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

#include <mutex>

namespace spdlog {
template class sinks::base_sink<std::mutex>;
template class sinks::base_sink<details::null_mutex>;
template class sinks::ansicolor_sink<details::console_mutex>;
template class sinks::ansicolor_sink<details::console_nullmutex>;
template class sinks::ansicolor_stdout_sink<details::console_mutex>;
template class sinks::ansicolor_stderr_sink<details::console_mutex>;
template class sinks::stdout_sink_base<details::console_mutex>;
template class sinks::stderr_sink<details::console_mutex>;
}  // namespace spdlog
