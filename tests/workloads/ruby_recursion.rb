# Recursion#down calls itself until DEPTH + 1 frames of it are on the stack,
# spins SPIN steps in Recursion#bottom, returns and starts again: nearly every
# sample holds Recursion#bottom above DEPTH + 1 Recursion#down above <main>.
# At the end (SECONDS, or SIGTERM) prints "recursions_per_second N": the
# throughput the overhead benchmark compares. READY, when given, is written
# (renamed into place) once the first recursion has returned: a test records
# after it, not while the interpreter still boots (seconds under emulation).
#
#   ruby ruby_recursion.rb DEPTH SECONDS [SPIN [READY]]
class Recursion
  def bottom(spin)
    total = 0
    i = 0
    while i < spin
      total += i & 7
      i += 1
    end
    total
  end

  def down(depth, spin)
    return bottom(spin) if depth == 0
    down(depth - 1, spin)
  end
end

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

depth = Integer(ARGV.fetch(0))
seconds = Float(ARGV.fetch(1))
spin = Integer(ARGV.fetch(2, "200000"))
ready = ARGV[3]
stopping = false
Signal.trap("TERM") { stopping = true }
recursion = Recursion.new
start = now
calls = 0
while !stopping && now - start < seconds
  recursion.down(depth, spin)
  calls += 1
  if ready && calls == 1
    File.write(ready + ".part", "ready\n")
    File.rename(ready + ".part", ready)
  end
end
puts "recursions_per_second #{calls / (now - start)}"
$stdout.flush
