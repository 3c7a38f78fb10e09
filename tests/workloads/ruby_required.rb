# Requires ruby_required_top.rb, whose top level spins for SECONDS: its
# samples are in `<top (required)>` of that file, under Kernel#require_relative
# under this file's <main>.
#
#   ruby ruby_required.rb SECONDS
$required_seconds = Float(ARGV.fetch(0))
require_relative "ruby_required_top"
