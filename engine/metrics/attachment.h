// attachment.h — the Prometheus endpoint attached to a controller (mesh/attachment.h): with
// metrics.bind set, the registry (export.h) is fed from where the controller's own records are —
// every event as the event log gets it, every policy decision as the slot makes it, each recovery,
// snapshot and plan decision as the driver's actions arrive, and the state (steps, loss, nodes,
// plan, ...) after every batch of the driver's actions and every mesh message — and served over
// HTTP from civetweb's threads (endpoint.h).
#pragma once

#include "job/config.h"
#include "mesh/attachment.h"

namespace sal::metrics {

// Makes the endpoint the job's metrics section says (its credential and TLS files relative to the
// job file; with no metrics.bind, callers attach nothing).
mesh::Attach attach(const job::JobConfig& job);

}  // namespace sal::metrics
