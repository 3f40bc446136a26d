/* Calls a QnnLog_Callback_t the way a real QNN backend does: with a printf format and a
 * va_list. Stable Rust can call a variadic C function but cannot make a va_list, hence C. */
#include <stdarg.h>
#include <stdint.h>

typedef void (*qnn_log_callback)(const char *fmt, uint32_t level, uint64_t timestamp, va_list args);

void qnn_sim_log(qnn_log_callback callback, uint32_t level, uint64_t timestamp, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  callback(fmt, level, timestamp, args);
  va_end(args);
}
