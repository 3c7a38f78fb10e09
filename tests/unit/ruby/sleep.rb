# The second Ruby workload of tests/unit/ruby/: a module's singleton method
# that sleeps in Kernel.sleep (a C function owned by Kernel's singleton
# class), called from a method defined at top level (owned by Object). It
# prints its stack, innermost first, named as CRuby 3.4's backtraces name
# it, then sleeps until killed:
#   frame NAME|PATH|LINE   (no path and line 0 for a C function)
#   ready
$frames = []

module Waiter
  def self.wait_here
    $frames << "Waiter.wait_here|#{__FILE__}|#{__LINE__ + 3}"
    $frames << "Kernel.sleep||0"
    $frames.reverse_each { |frame| $stdout.puts "frame #{frame}" }
    $stdout.puts "ready"; $stdout.flush; Kernel.sleep
  end
end

def top_level
  $frames << "Object#top_level|#{__FILE__}|#{__LINE__ + 1}"
  Waiter.wait_here
end

$frames << "<main>|#{__FILE__}|#{__LINE__ + 1}"
top_level
