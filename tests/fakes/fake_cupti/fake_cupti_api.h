// The plugin's CUPTI table filled with the fake libcupti's functions (static library), for the
// tracer's unit tests and benchmark.
#pragma once

#include "plugin/cupti/cupti_api.h"
#include "tests/fakes/fake_cupti/fake_cupti.h"

namespace sentinel::testing {

inline plugin::cupti::CuptiApi FakeCuptiApi() {
  plugin::cupti::CuptiApi api;
  api.get_version = &cuptiGetVersion;
  api.get_timestamp = &cuptiGetTimestamp;
  api.activity_register_callbacks = &cuptiActivityRegisterCallbacks;
  api.activity_enable = &cuptiActivityEnable;
  api.activity_disable = &cuptiActivityDisable;
  api.activity_flush_all = &cuptiActivityFlushAll;
  api.activity_get_next_record = &cuptiActivityGetNextRecord;
  api.activity_get_num_dropped_records = &cuptiActivityGetNumDroppedRecords;
  api.activity_set_attribute = &cuptiActivitySetAttribute;
  api.get_result_string = &cuptiGetResultString;
  return api;
}

}  // namespace sentinel::testing
