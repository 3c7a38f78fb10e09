# CPU split about 50/30/20 between Shares#hot_a, #hot_b and #hot_c, each under
# its own caller (#caller_a, #caller_b, #caller_c), called from Shares#run
# under <main>. Each caller measures the CPU time of its hot method's call
# with the thread's own CPU clock (CLOCK_THREAD_CPUTIME_ID, the kernel's
# account of the time this thread ran): the shares the profile must show,
# measured without sampling. The clock counts from SIGUSR1 to SIGUSR2,
# which the test sends when the profiler starts and stops sampling, so both
# measure the same seconds; a wall-clock sampler would also count the time
# the thread waits for a CPU (eight busy threads share two in CI), which a
# CPU profiler rightly does not.
#
#   ruby ruby_shares.rb SECONDS OUT_FILE READY_FILE
#
# READY_FILE is created once the signal handlers are in place: a signal
# sent before that would end the process.
#
# Runs SECONDS or until SIGTERM, then writes one line per hot method to
# OUT_FILE: "NAME FIRST_LINE LAST_LINE CPU_MICROSECONDS" (FIRST_LINE is the
# def, LAST_LINE its end).
class Shares
  # The three hot methods do the same work on purpose: their shares are set
  # by how much each caller asks of it (5:3:2).
  def hot_a(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
    end
    total
  end

  def hot_b(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
    end
    total
  end

  def hot_c(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
    end
    total
  end

  def initialize(counting)
    @counting = counting
    @cpu = Hash.new(0.0)
  end
  attr_reader :cpu

  def cpu_now
    Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID)
  end

  # The CPU time of one hot call, counted while the window is open. A call
  # lasts milliseconds (a hundred or so emulated): the calls cut by the
  # window's ends are a small part of its seconds. The callers call the hot
  # methods themselves, so that a hot method's caller is its Ruby parent.
  def count(name, start)
    @cpu[name] += cpu_now - start if @counting[0]
  end

  def caller_a(n)
    start = cpu_now
    hot_a(5 * n)
    count("hot_a", start)
  end
  def caller_b(n)
    start = cpu_now
    hot_b(3 * n)
    count("hot_b", start)
  end
  def caller_c(n)
    start = cpu_now
    hot_c(2 * n)
    count("hot_c", start)
  end

  def run(deadline, stopping)
    while !stopping[0] && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      caller_a(20_000)
      caller_b(20_000)
      caller_c(20_000)
    end
  end
end

HOT = %w[hot_a hot_b hot_c].freeze

seconds = Float(ARGV.fetch(0))
out = ARGV.fetch(1)
stopping = [false]
Signal.trap("TERM") { stopping[0] = true }
counting = [false]
Signal.trap("USR1") { counting[0] = true }
Signal.trap("USR2") { counting[0] = false }
File.write(ARGV.fetch(2), "")

shares = Shares.new(counting)
shares.run(Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds, stopping)

lines = HOT.map do |name|
  method = Shares.instance_method(name)
  first = method.source_location[1]
  # The method's end: the first line after the def that is just "  end".
  source = File.readlines(__FILE__)
  last = (first...source.size).find { |i| source[i] =~ /\A  end\s*\z/ } + 1
  "#{name} #{first} #{last} #{(shares.cpu[name] * 1e6).round}"
end
File.write(out + ".tmp", lines.join("\n") + "\n")
File.rename(out + ".tmp", out)
