# What a profile reader sees of a Ruby program: nearly all the time in
# Worker#burn (integer arithmetic in the VM: the interpreter's own C code
# under one Ruby method), called from blocks whose names pprof readers used
# to mangle: <main>, block in <main>, <class:Worker>, block in <class:Worker>,
# block (2 levels) in <class:Worker>.
#
#   ruby ruby_folding.rb SECONDS
DEADLINE = Time.now + Float(ARGV[0])

[1].each do
  class Worker
    def burn(n)
      total = 0
      i = 0
      while i < n
        total += (i * i) % 7
        i += 1
      end
      total
    end

    worker = Worker.new
    [1].each do
      loop do
        worker.burn(200_000)
        break if Time.now > DEADLINE
      end
    end
  end
end
