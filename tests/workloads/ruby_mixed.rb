# Ruby code called back from C functions: Mixed#work_in_times runs inside
# `5.times { }` (Integer#times) and Mixed#work_in_each inside `each { }`
# (Array#each), so their samples have the C function's frame between the
# block and its Ruby caller, with the interpreter's native frames around it.
#
#   ruby ruby_mixed.rb SECONDS
class Mixed
  def spin(n)
    total = 0
    i = 0
    while i < n
      total += i & 7
      i += 1
    end
    total
  end

  def work_in_times
    spin(50_000)
  end
  def work_in_each
    spin(50_000)
  end

  def run_times
    5.times { work_in_times }
  end

  def run_each
    [1, 2, 3, 4, 5].each { work_in_each }
  end
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV.fetch(0))
mixed = Mixed.new
while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  mixed.run_times
  mixed.run_each
end
