# CPU split about 50/30/20 between Shares#hot_a, #hot_b and #hot_c, each under
# its own caller (#caller_a, #caller_b, #caller_c), called from Shares#run
# under <main>. An oracle thread reads the main thread's
# Thread#backtrace_locations every 5 ms and counts which hot method it is in:
# the shares an independent sampler measured in the same process, for the
# profile to be compared with. The hot loops call Thread.pass every 1000
# iterations (well under a millisecond, even emulated) so that the oracle
# gets the GVL soon after it wakes (CRuby hands it over only every 100 ms
# otherwise): its samples fall every 5 ms or so of time, not of work, as a
# CPU profiler's do, so a method that runs slowly for a while weighs more in
# both.
# The oracle counts from SIGUSR1 to SIGUSR2, which the test sends when the
# profiler starts and stops sampling: both measure the same seconds, so a
# stretch in which this process runs slowly (a loaded emulated guest) weighs
# the same in both.
#
#   ruby ruby_shares.rb SECONDS OUT_FILE
#
# Runs SECONDS or until SIGTERM, then writes one line per hot method to
# OUT_FILE: "NAME FIRST_LINE LAST_LINE ORACLE_SAMPLES" (FIRST_LINE is the def,
# LAST_LINE its end).
class Shares
  STEP = 1_000

  # The three hot methods do the same work on purpose: their shares are set
  # by how much each caller asks of it (5:3:2).
  def hot_a(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
      Thread.pass if i % STEP == 0
    end
    total
  end

  def hot_b(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
      Thread.pass if i % STEP == 0
    end
    total
  end

  def hot_c(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
      Thread.pass if i % STEP == 0
    end
    total
  end

  def caller_a(n)
    hot_a(5 * n)
  end
  def caller_b(n)
    hot_b(3 * n)
  end
  def caller_c(n)
    hot_c(2 * n)
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

worker = Thread.current
counts = Hash.new(0)
oracle = Thread.new do
  until stopping[1]
    sleep 0.005
    next unless counting[0]
    locations = worker.backtrace_locations || []
    hot = locations.find { |l| HOT.include?(l.base_label) }
    counts[hot.base_label] += 1 if hot
  end
end

Shares.new.run(Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds, stopping)
stopping[1] = true
oracle.join

lines = HOT.map do |name|
  method = Shares.instance_method(name)
  first = method.source_location[1]
  # The method's end: the first line after the def that is just "  end".
  source = File.readlines(__FILE__)
  last = (first...source.size).find { |i| source[i] =~ /\A  end\s*\z/ } + 1
  "#{name} #{first} #{last} #{counts[name]}"
end
File.write(out + ".tmp", lines.join("\n") + "\n")
File.rename(out + ".tmp", out)
