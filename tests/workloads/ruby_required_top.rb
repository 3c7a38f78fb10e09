# The top level of a required file (ruby_required.rb requires it): it spins
# until $required_seconds have passed.
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + $required_seconds
total = 0
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  i = 0
  while i < 10_000
    total += i & 7
    i += 1
  end
end
