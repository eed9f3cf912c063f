// Renders the aggregator's state for the outside world. One file per job: Prometheus text
// (prometheus_text.h), the HTTP API's JSON (api_json.h), the trace JSON (trace_json.h), and the
// helpers they share (render_common.h). This header gathers them for the HTTP handlers.
#pragma once

#include "collector/export/api_json.h"
#include "collector/export/prometheus_text.h"
#include "collector/export/render_common.h"
#include "collector/export/trace_json.h"
