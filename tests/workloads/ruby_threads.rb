# Three Ruby threads, each in its own methods: Threads#thread_one_work under
# #thread_one, and so on; each work method holds its thread's loop, so every
# sample of the thread has it. thread_three mostly sleeps or waits for the
# GVL, which the two others hold for whole time slices (100 ms): it works
# 20 ms each time it has the GVL, then sleeps 10 ms, enough samples to judge
# (a shorter spin got none). Once all three run it writes "METHOD TID" per
# thread to OUT_FILE
# (Thread#native_thread_id, 3.1+; before that the tid whose /proc comm is
# the thread's name).
#
#   ruby ruby_threads.rb SECONDS OUT_FILE
class Threads
  def spin(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
    end
    total
  end

  def thread_one_work(deadline)
    loop_until(deadline) { spin(20_000) }
  end
  def thread_two_work(deadline)
    loop_until(deadline) { spin(20_000) }
  end
  def thread_three_work(deadline)
    loop_until(deadline) do
      busy_until = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.02
      spin(2_000) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < busy_until
      sleep(0.01)
    end
  end

  def thread_one(deadline)
    thread_one_work(deadline)
  end
  def thread_two(deadline)
    thread_two_work(deadline)
  end
  def thread_three(deadline)
    thread_three_work(deadline)
  end

  def loop_until(deadline)
    yield while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  end
end

def tid_of(thread, name)
  return thread.native_thread_id if thread.respond_to?(:native_thread_id)
  Dir.glob("/proc/self/task/*/comm").each do |comm|
    return File.basename(File.dirname(comm)).to_i if File.read(comm).strip == name
  end
  nil
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV.fetch(0))
out = ARGV.fetch(1)
work = Threads.new
threads = %w[one two three].map do |n|
  t = Thread.new { work.public_send("thread_#{n}", deadline) }
  t.name = "thread_#{n}"
  [n, t]
end
sleep 0.2
lines = threads.map { |n, t| "thread_#{n}_work #{tid_of(t, "thread_#{n}")}" }
File.write(out + ".tmp", lines.join("\n") + "\n")
File.rename(out + ".tmp", out)
threads.each { |_, t| t.join }
