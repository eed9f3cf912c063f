// Escaping of wire strings for people and logs: see wire_text.h.
#include "common/wire_text.h"

namespace sentinel::rules {

size_t EscapeWireText(const char* in, size_t n, char* out, size_t cap) noexcept {
  if (out == nullptr || cap == 0) return 0;
  static constexpr char kHex[] = "0123456789abcdef";
  size_t w = 0;
  for (size_t i = 0; in != nullptr && i < n && in[i] != '\0'; ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    char esc[4];
    size_t len = 0;
    if (c < 0x20 || c == 0x7f) {
      esc[0] = '\\';
      esc[1] = 'x';
      esc[2] = kHex[c >> 4];
      esc[3] = kHex[c & 0xf];
      len = 4;
    } else if (c == '\\') {
      esc[0] = '\\';
      esc[1] = '\\';
      len = 2;
    } else {
      esc[0] = static_cast<char>(c);
      len = 1;
    }
    if (w + len >= cap) break;
    for (size_t k = 0; k < len; ++k) out[w++] = esc[k];
  }
  out[w] = '\0';
  return w;
}

}  // namespace sentinel::rules
