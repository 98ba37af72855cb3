// Internal: recycled coroutine frames for the session's coroutines (issue 32).
//
// Boost 1.74's asio keeps one spare frame per thread: a request's nested
// coroutines (the session's steps, the handler) allocated every frame but one
// on every request. A coroutine whose promise is PooledFrame<T> (opted in per
// class or signature by a std::coroutine_traits specialization, see
// server/session.cc) takes its frame from FramePool instead: per thread, free
// lists by size class (64-byte steps up to kMaxFrame bytes, at most
// kMaxSpares blocks a class), so after warm-up a request allocates no frame.
// A frame freed on another thread (a coroutine destroyed at shutdown) joins
// that thread's lists; larger frames, and frames freed once their thread's
// pool is gone, go to the global heap.
//
// PooledFrame<T> derives from asio's awaitable_frame<T> and adds no state:
// asio converts the promise to a coroutine handle as its own frame type, which
// names the same address (same alignment, base at offset 0). It relies on
// Boost 1.74's detail::awaitable_frame; a Boost with more spares per thread
// (1.78+) makes it unnecessary.
//
// Thread safety: each thread's pool is its own; nothing is shared.
#ifndef TOLLGATE_SERVER_FRAME_POOL_H_
#define TOLLGATE_SERVER_FRAME_POOL_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <coroutine>
#include <cstddef>
#include <new>

namespace tollgate::server {

class FramePool {
 public:
  static constexpr std::size_t kStep = 64;
  static constexpr std::size_t kMaxFrame = 4096;
  static constexpr int kMaxSpares = 8;

  static void* Allocate(std::size_t size) {
    Lists* lists = Mine();
    const std::size_t c = ClassOf(size);
    if (lists != nullptr && c < kClasses && lists->head[c] != nullptr) {
      Block* b = lists->head[c];
      lists->head[c] = b->next;
      --lists->count[c];
      return b;
    }
    return ::operator new(c < kClasses ? (c + 1) * kStep : size);
  }

  static void Deallocate(void* p, std::size_t size) noexcept {
    Lists* lists = Mine();
    const std::size_t c = ClassOf(size);
    if (lists != nullptr && c < kClasses && lists->count[c] < kMaxSpares) {
      Block* b = static_cast<Block*>(p);
      b->next = lists->head[c];
      lists->head[c] = b;
      ++lists->count[c];
      return;
    }
    ::operator delete(p);
  }

 private:
  static constexpr std::size_t kClasses = kMaxFrame / kStep;
  struct Block {
    Block* next;
  };
  // Trivially destructible: still addressable after Drain has run at thread exit.
  struct Lists {
    Block* head[kClasses];
    int count[kClasses];
    bool dead;
  };
  // Frees the spares when the thread ends; later frees go to the heap.
  struct Drain {
    ~Drain() {
      Lists& l = lists_;
      l.dead = true;
      for (std::size_t c = 0; c < kClasses; ++c) {
        while (Block* b = l.head[c]) {
          l.head[c] = b->next;
          ::operator delete(b);
        }
        l.count[c] = 0;
      }
    }
  };

  static std::size_t ClassOf(std::size_t size) { return size == 0 ? 0 : (size - 1) / kStep; }

  static Lists* Mine() {
    if (lists_.dead) return nullptr;
    thread_local Drain drain;  // registered on the thread's first frame
    (void)drain;
    return &lists_;
  }

  static inline thread_local Lists lists_{};
};

// The promise of a coroutine returning net::awaitable<T> whose frame comes
// from FramePool (see above).
template <typename T>
struct PooledFrame : boost::asio::detail::awaitable_frame<T, boost::asio::any_io_executor> {
  using Base = boost::asio::detail::awaitable_frame<T, boost::asio::any_io_executor>;

  static void* operator new(std::size_t size) { return FramePool::Allocate(size); }
  static void operator delete(void* p, std::size_t size) { FramePool::Deallocate(p, size); }

  // An awaitable suspends only a caller whose handle names asio's own frame
  // type: hand it this frame as one (the same address, see above).
  using Base::await_transform;
  template <typename U>
  auto await_transform(boost::asio::awaitable<U, boost::asio::any_io_executor> a) const {
    struct Awaiter {
      boost::asio::awaitable<U, boost::asio::any_io_executor> inner;
      bool await_ready() const noexcept { return inner.await_ready(); }
      void await_suspend(std::coroutine_handle<PooledFrame> h) {
        inner.await_suspend(std::coroutine_handle<Base>::from_promise(h.promise()));
      }
      U await_resume() { return inner.await_resume(); }
    };
    return Awaiter{std::move(a)};
  }
};

}  // namespace tollgate::server

#endif  // TOLLGATE_SERVER_FRAME_POOL_H_
