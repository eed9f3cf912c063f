// The collector's one thread start may construct a std::thread itself.
#pragma once
#include <thread>
#include <utility>

template <typename Body>
std::thread StartThread(Body&& body) {
  return std::thread(std::forward<Body>(body));
}
