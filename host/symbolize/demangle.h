// Demangling of C++ (Itanium ABI) symbol names for display.
#pragma once

#include <string>

namespace omniprof {

// Returns the demangled form of an Itanium-mangled name ("_Z..."), including
// GCC clone suffixes ("[clone .cold]"); any other name, or one the demangler
// rejects, comes back unchanged.
std::string demangle(const std::string& name);

}  // namespace omniprof
