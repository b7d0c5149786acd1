// devices.h — device specs as operators write them: "cpu:4" (four CPU worker devices),
// "cuda:0,1" (two GPUs by ordinal), "cuda:0". Parsed into one name per worker ("cpu:0", "cuda:1").
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace sal {

constexpr int kMaxDevicesPerNode = 64;

// "cpu:K" -> cpu:0..cpu:K-1 ; "cuda:a,b" -> cuda:a, cuda:b. Errors say what form was expected.
Result<std::vector<std::string>> parse_devices(const std::string& spec);

// One device name as a worker carries it: "cpu:N" or "cuda:N" with N < kMaxDevicesPerNode.
bool valid_device_name(const std::string& name);

// A node's workers by index: worker i of a node of `devices` devices runs on device slot
// i % devices. The first worker of slot s has index s; one started again after a crash takes the
// slot's next index, s + k x devices (the agent gives it, the membership reads it back).
inline size_t device_slot(uint32_t index, size_t devices) { return devices == 0 ? 0 : index % devices; }
inline bool restarted_worker(uint32_t index, size_t devices) { return index >= devices; }

}  // namespace sal
