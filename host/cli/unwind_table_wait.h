// record's start: the clock (the -d duration, and the samples the profile
// keeps) starts once the unwind tables of the processes found at start
// (-p's, or the whole machine's) are stored. Until then a walk through a
// file whose table is still being built falls back to frame pointers and may
// stop short, which would show as partial stacks at the start of every
// recording on a cold page cache.
#pragma once

#include <atomic>
#include <chrono>

namespace omniprof {

class Agent;

// Waits until agent.startup_progress() is ready, at most `limit` (0: not at
// all) or until `stop` is set, saying "loading unwind tables: 41/52" on
// stderr meanwhile (rewritten in place on a terminal, else one line when it
// changes, at most once a second), then one log line: "unwind tables ready:
// ..." or "unwind tables not ready after N s: FILES; ...". True when ready.
bool wait_for_unwind_tables(const Agent& agent, std::chrono::seconds limit, bool tty,
                            const std::atomic<bool>& stop);

}  // namespace omniprof
