/* Everything qnn::sys declares. <stdbool.h> first: some QNN headers use `bool` without it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "QnnInterface.h"
#include "System/QnnSystemInterface.h"
#include "HTP/QnnHtpDevice.h"
