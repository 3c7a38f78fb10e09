#include "ruby_version.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>

namespace omniprof::ruby {
namespace {

// The longest instruction sequence decode_rip_relative_load accepts.
constexpr std::size_t kLoadAndReturnBytes = 12;  // endbr64 (4), 48 8b 05 disp32 (7), c3

std::string hex_bytes(std::span<const uint8_t> bytes) {
  std::string text;
  char byte[4];
  for (uint8_t value : bytes) {
    std::snprintf(byte, sizeof(byte), text.empty() ? "%02x" : " %02x", value);
    text += byte;
  }
  return text;
}

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

Result<RubyVersion> read_ruby_version(const ElfFile& elf) {
  auto symbol = elf.find_symbol("ruby_version");
  if (!symbol) return make_error(elf.path() + ": " + symbol.error().message);
  if (!*symbol) return make_error(elf.path() + ": no ruby_version symbol (not a ruby executable or libruby)");
  // "3.1.2" is 6 bytes with its NUL; the symbol's size says so, a size of 0
  // (hand-written assembly, a strange linker) gets a generous bound.
  uint64_t size = (*symbol)->size;
  if (size == 0 || size > 32) size = 32;
  auto bytes = elf.read_at_vaddr((*symbol)->value, size);
  if (!bytes) return make_error(elf.path() + ": ruby_version: " + bytes.error().message);
  const auto* nul = static_cast<const uint8_t*>(std::memchr(bytes->data(), 0, bytes->size()));
  if (!nul) return make_error(elf.path() + ": ruby_version at " + hex((*symbol)->value) + " is not a NUL-terminated string");
  std::string text(reinterpret_cast<const char*>(bytes->data()), nul - bytes->data());
  RubyVersion version;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%d.%d.%d%n", &version.major, &version.minor, &version.patch, &consumed) != 3 ||
      static_cast<std::size_t>(consumed) != text.size() || version.major < 1 || version.minor < 0 ||
      version.patch < 0) {
    return make_error(elf.path() + ": ruby_version is \"" + text + "\", not MAJOR.MINOR.PATCH");
  }
  return version;
}

Result<uint64_t> decode_rip_relative_load(std::span<const uint8_t> code, uint64_t function_vaddr) {
  // A build with -fcf-protection (Debian 13's) starts every function with
  // endbr64 (f3 0f 1e fa).
  static constexpr uint8_t kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  std::size_t endbr = code.size() >= 4 && std::memcmp(code.data(), kEndbr64, 4) == 0 ? 4 : 0;
  std::size_t prefix = endbr + (code.size() > endbr && code[endbr] == 0x48 ? 1 : 0);
  std::size_t length = prefix + 7;  // [endbr64] [48] 8b 05 disp32 c3
  if (code.size() < length || code[prefix] != 0x8b || code[prefix + 1] != 0x05 || code[prefix + 6] != 0xc3) {
    return make_error("code at " + hex(function_vaddr) + " is " + hex_bytes(code.first(std::min(code.size(), length))) +
                      ", not mov eax/rax, [rip + disp32]; ret (8b 05 .. .. .. .. c3, optionally 48-prefixed, "
                      "optionally after endbr64)");
  }
  int32_t displacement;
  std::memcpy(&displacement, code.data() + prefix + 2, 4);
  // RIP is the address of the instruction after the mov (the ret).
  return function_vaddr + prefix + 6 + static_cast<int64_t>(displacement);
}

Result<uint64_t> find_global_symbols(const ElfFile& elf) {
  if (elf.has_symtab()) {
    auto symbol = elf.find_symbol("ruby_global_symbols");
    if (!symbol) return make_error(elf.path() + ": " + symbol.error().message);
    if (*symbol) return (*symbol)->value;
  }
  auto function = elf.find_symbol("rb_sym_immortal_count");
  if (!function) return make_error(elf.path() + ": " + function.error().message);
  if (!*function) {
    return make_error(elf.path() + ": neither ruby_global_symbols nor rb_sym_immortal_count is defined");
  }
  std::size_t length = kLoadAndReturnBytes;
  if ((*function)->size != 0 && (*function)->size < length) length = (*function)->size;
  auto code = elf.read_at_vaddr((*function)->value, length);
  if (!code) return make_error(elf.path() + ": rb_sym_immortal_count: " + code.error().message);
  auto address = decode_rip_relative_load(*code, (*function)->value);
  if (!address) return make_error(elf.path() + ": rb_sym_immortal_count: " + address.error().message);
  return *address;
}

}  // namespace omniprof::ruby
