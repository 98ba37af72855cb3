#include "redis/reply_reader.h"

#include <cstring>
#include <string>

namespace tollgate::redis {
namespace {

// hiredis' own object functions (static in hiredis.c), taken from a reader it
// made: the bounded functions below charge the budget, then delegate, so the
// objects are exactly what freeReplyObject expects.
const redisReplyObjectFunctions& Defaults() {
  static const redisReplyObjectFunctions defaults = [] {
    redisReader* probe = redisReaderCreate();
    redisReplyObjectFunctions fn = *probe->fn;
    redisReaderFree(probe);
    return fn;
  }();
  return defaults;
}

ReplyReader* Owner(const redisReadTask* task) { return static_cast<ReplyReader*>(task->privdata); }

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  if (!Owner(task)->Charge(1, len)) return nullptr;
  return Defaults().createString(task, str, len);
}

void* CreateArray(const redisReadTask* task, int elements) {
  if (elements < 0 || !Owner(task)->Charge(1 + static_cast<size_t>(elements), 0)) return nullptr;
  return Defaults().createArray(task, elements);
}

void* CreateInteger(const redisReadTask* task, long long value) {
  if (!Owner(task)->Charge(1, 0)) return nullptr;
  return Defaults().createInteger(task, value);
}

void* CreateNil(const redisReadTask* task) {
  if (!Owner(task)->Charge(1, 0)) return nullptr;
  return Defaults().createNil(task);
}

void FreeObject(void* obj) { Defaults().freeObject(obj); }

redisReplyObjectFunctions kBounded = {CreateString, CreateArray, CreateInteger, CreateNil,
                                      FreeObject};

}  // namespace

ReplyReader::ReplyReader() : reader_(redisReaderCreateWithFunctions(&kBounded)) {
  if (reader_ != nullptr) {
    reader_->privdata = this;
    reader_->maxbuf = 0;  // keep the buffer between replies (no shrink and regrow)
  } else {
    error_ = "out of memory";
  }
}

ReplyReader::~ReplyReader() {
  if (reader_ != nullptr) redisReaderFree(reader_);
}

bool ReplyReader::Charge(size_t objects, size_t bytes) {
  if (bytes > kMaxBulkBytes) {
    error_ = "a string of " + std::to_string(bytes) + " bytes (at most " +
             std::to_string(kMaxBulkBytes) + ")";
    return false;
  }
  objects_ += objects;
  bytes_ += bytes;
  if (objects_ > kMaxReplyObjects) {
    error_ = "a reply of more than " + std::to_string(kMaxReplyObjects) + " objects";
    return false;
  }
  if (bytes_ > kMaxReplyBytes) {
    error_ = "a reply of more than " + std::to_string(kMaxReplyBytes) + " string bytes";
    return false;
  }
  return true;
}

bool ReplyReader::Feed(const char* data, size_t n) {
  if (!error_.empty()) return false;
  if (n == 0) return true;
  if (redisReaderFeed(reader_, data, n) != REDIS_OK) {
    error_ = reader_->errstr;
    return false;
  }
  return true;
}

bool ReplyReader::Next(ReplyPtr* reply) {
  reply->reset();
  if (!error_.empty()) return false;
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    // A bound refused an object: hiredis reports it as "Out of memory".
    if (error_.empty()) error_ = reader_->errstr;
    return false;
  }
  if (raw != nullptr) {
    reply->reset(static_cast<redisReply*>(raw));
    objects_ = 0;
    bytes_ = 0;
    return true;
  }
  // Needs more bytes: what is buffered and unparsed is one item still
  // arriving (a bulk string or a line), which must fit its bound.
  const size_t pending = reader_->len - reader_->pos;
  constexpr size_t kHeader = 32;  // "$<20 digits>\r\n" and the final "\r\n"
  if (pending > kMaxBulkBytes + kHeader) {
    error_ = "an item of more than " + std::to_string(kMaxBulkBytes) + " bytes";
    return false;
  }
  return true;
}

}  // namespace tollgate::redis
