// Result<T> lives in the SDK (sdk/include/omniprof/result.hpp) so that the
// host and plugins share it; host code keeps including this header.
#pragma once

#include <omniprof/result.hpp>
