#include "trace/otlp_reply.h"

#include <algorithm>

#include "tollgate/http_text.h"

namespace tollgate::trace {
namespace {

constexpr std::string_view kCrlf = "\r\n";

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Visible bytes, spaces and tabs: what a field value or a chunk extension may hold.
bool IsFieldText(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
  });
}

std::string_view TrimSpace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

CollectorReply::State CollectorReply::Feed(std::string_view bytes) {
  if (state_ != State::kMore) return state_;
  bytes_fed_ += bytes.size();
  pending_.append(bytes);
  return Parse();
}

CollectorReply::State CollectorReply::Finish() {
  if (state_ != State::kMore) return state_;
  if (phase_ == Phase::kCloseBody) return Done();
  return Fail("the collector closed the connection before the reply was complete");
}

CollectorReply::State CollectorReply::Fail(std::string why, bool overflow) {
  state_ = State::kFailed;
  overflow_ = overflow;
  error_ = std::move(why);
  pending_.clear();
  pending_.shrink_to_fit();
  return state_;
}

CollectorReply::State CollectorReply::Done() {
  state_ = State::kDone;
  pending_.clear();
  return state_;
}

bool CollectorReply::TakeBody(size_t n) {
  if (n > limits_.body_bytes - body_size_) {
    Fail("body longer than " + std::to_string(limits_.body_bytes) + " bytes", true);
    return false;
  }
  body_size_ += n;
  pending_.erase(0, n);
  return true;
}

// One pass over pending_ per phase until it needs more bytes or ends.
CollectorReply::State CollectorReply::Parse() {
  while (state_ == State::kMore) {
    switch (phase_) {
      case Phase::kHead: {
        const size_t end = pending_.find("\r\n\r\n");
        if (end == std::string::npos || end + 4 > limits_.head_bytes) {
          if (end != std::string::npos || pending_.size() > limits_.head_bytes) {
            return Fail("head longer than " + std::to_string(limits_.head_bytes) + " bytes", true);
          }
          return state_;
        }
        const std::string head = pending_.substr(0, end);
        pending_.erase(0, end + 4);
        if (!ParseHead(head)) return state_;
        break;
      }
      case Phase::kLengthBody:
      case Phase::kChunkData: {
        const size_t n = size_t(std::min<uint64_t>(left_, pending_.size()));
        if (!TakeBody(n)) return state_;
        left_ -= n;
        if (left_ > 0) return state_;
        if (phase_ == Phase::kLengthBody) return Done();
        phase_ = Phase::kChunkEnd;
        break;
      }
      case Phase::kCloseBody:
        if (!TakeBody(pending_.size())) return state_;
        return state_;
      case Phase::kChunkEnd:
        if (pending_.size() < kCrlf.size()) return state_;
        if (!pending_.starts_with(kCrlf)) return Fail("a chunk's data is not followed by CRLF");
        pending_.erase(0, kCrlf.size());
        phase_ = Phase::kChunkLine;
        break;
      case Phase::kChunkLine: {
        const size_t eol = pending_.find(kCrlf);
        if (eol == std::string::npos || eol > limits_.chunk_line_bytes) {
          // Without its CRLF, a trailing CR may be the line's end whose LF is in the next read.
          const size_t seen = pending_.size() - (pending_.ends_with('\r') ? 1 : 0);
          if (eol != std::string::npos || seen > limits_.chunk_line_bytes) {
            return Fail("chunk-size line longer than " + std::to_string(limits_.chunk_line_bytes) +
                            " bytes",
                        true);
          }
          return state_;
        }
        if (!ParseChunkLine(std::string_view(pending_).substr(0, eol))) return state_;
        pending_.erase(0, eol + kCrlf.size());
        break;
      }
      case Phase::kTrailers: {
        const size_t eol = pending_.find(kCrlf);
        const size_t line = eol == std::string::npos ? pending_.size() : eol + kCrlf.size();
        if (line > limits_.head_bytes - trailer_size_) {
          return Fail("trailers longer than " + std::to_string(limits_.head_bytes) + " bytes",
                      true);
        }
        if (eol == std::string::npos) return state_;
        if (eol == 0) return Done();
        if (!IsFieldText(std::string_view(pending_).substr(0, eol))) return Fail("bad trailer");
        trailer_size_ += line;
        pending_.erase(0, line);
        break;
      }
    }
  }
  return state_;
}

// Status line and headers (without the blank line): the status, and how the
// body is framed.
bool CollectorReply::ParseHead(std::string_view head) {
  const size_t eol = head.find(kCrlf);
  const std::string_view status_line = head.substr(0, eol);
  std::string_view fields = eol == std::string_view::npos ? "" : head.substr(eol + 2);
  if (!(status_line.starts_with("HTTP/1.1 ") || status_line.starts_with("HTTP/1.0 ")) ||
      status_line.size() < 12 || (status_line.size() > 12 && status_line[12] != ' ') ||
      !IsFieldText(status_line)) {
    Fail("not an HTTP/1.x status line");
    return false;
  }
  for (size_t i = 9; i < 12; ++i) {
    if (status_line[i] < '0' || status_line[i] > '9') {
      Fail("not an HTTP/1.x status line");
      return false;
    }
    status_ = status_ * 10 + (status_line[i] - '0');
  }
  if (status_ < 100) {
    Fail("status out of range");
    return false;
  }
  bool chunked = false, has_length = false;
  uint64_t length = 0;
  while (!fields.empty()) {
    const size_t end = fields.find(kCrlf);
    const std::string_view field = fields.substr(0, end);
    fields = end == std::string_view::npos ? "" : fields.substr(end + 2);
    const size_t colon = field.find(':');
    const std::string_view name = field.substr(0, colon);
    if (colon == std::string_view::npos || name.empty() ||
        !std::all_of(name.begin(), name.end(), IsTokenChar) ||
        !IsFieldText(field.substr(colon + 1))) {
      Fail("a malformed header field");
      return false;
    }
    const std::string_view value = TrimSpace(field.substr(colon + 1));
    if (EqualsIgnoreCase(name, "transfer-encoding")) {
      if (chunked || !EqualsIgnoreCase(value, "chunked")) {
        Fail("a transfer-encoding other than chunked");
        return false;
      }
      chunked = true;
    } else if (EqualsIgnoreCase(name, "content-length")) {
      uint64_t n = 0;
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        Fail("a bad content-length");
        return false;
      }
      for (char c : value) n = n * 10 + uint64_t(c - '0');
      if (has_length && n != length) {
        Fail("two different content-lengths");
        return false;
      }
      has_length = true;
      length = n;
    }
  }
  if (chunked && has_length) {
    Fail("both transfer-encoding and content-length");
    return false;
  }
  if (status_ < 200 || status_ == 204 || status_ == 304) {
    Done();  // no body
  } else if (chunked) {
    phase_ = Phase::kChunkLine;
  } else if (has_length) {
    if (length > limits_.body_bytes) {
      Fail("body longer than " + std::to_string(limits_.body_bytes) + " bytes", true);
      return false;
    }
    left_ = length;
    phase_ = Phase::kLengthBody;
    if (length == 0) Done();
  } else {
    phase_ = Phase::kCloseBody;
  }
  return state_ != State::kFailed;
}

// "1a2b[;extension]": the chunk's size into left_; 0 starts the trailers.
bool CollectorReply::ParseChunkLine(std::string_view line) {
  const std::string_view size = TrimSpace(line.substr(0, line.find(';')));
  if (size.empty() || size.size() > 15 || !IsFieldText(line)) {
    Fail("bad chunk size");
    return false;
  }
  uint64_t n = 0;
  for (char c : size) {
    const int digit = HexDigit(c);
    if (digit < 0) {
      Fail("bad chunk size");
      return false;
    }
    n = n * 16 + uint64_t(digit);
  }
  if (n > limits_.body_bytes - body_size_) {
    Fail("body longer than " + std::to_string(limits_.body_bytes) + " bytes", true);
    return false;
  }
  left_ = n;
  phase_ = n == 0 ? Phase::kTrailers : Phase::kChunkData;
  return true;
}

}  // namespace tollgate::trace
