// `sentinelctl why [RANK]`: the cause of each late rank as sentineld judged it (the `cause` object
// of its firing straggler and slow-node alerts, aggregate/cause_evidence.h): the cause and why
// (the figure that explains the lateness, against its usual), what backs it, what to do, a second
// cause that also cleared its bars, and which evidence could not be read. "unknown" causes say why.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sentinel::ctl {

// `alerts` = GET /v1/alerts; `rank` < 0: every late rank. Pure; every string from the answer is
// escaped.
std::string WhyText(const nlohmann::json& alerts, int rank);

}  // namespace sentinel::ctl
