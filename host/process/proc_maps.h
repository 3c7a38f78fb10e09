// The parser of /proc/PID/maps lives in the SDK (plugins read maps too).
#pragma once

#include "omniprof/support/proc_maps.h"
