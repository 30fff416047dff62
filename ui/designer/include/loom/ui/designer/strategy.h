// Strategy edits that must keep the plan consistent: the device list has one entry per
// rank (data_parallel x stages, plus parameter servers), in stage-major rank order, so
// changing the degree, the stage count, the sync mode or the server count re-lays the
// devices out instead of leaving the person to fix the list by hand. Plain functions on
// a Plan, used inside PlanDocument::edit; the strategy panel and the device table share them.
#pragma once

#include <QString>

#include "loom/core/plan.h"

namespace loom::ui {

// Upper bound on the ranks the designer lays out, so a mistyped 100000 does not build a
// device list that size; validate_plan reports the mismatch instead.
inline constexpr int kMaxDesignerRanks = 1024;

bool usesServers(loom::SyncMode mode);  // parameter_server and ssp

// Each keeps plan.parallel.devices in step (see fitDevices).
void setDataParallel(loom::Plan& plan, int degree);
void setStages(loom::Plan& plan, int stages);  // also pulls layers off stages that no longer exist
void setSyncMode(loom::Plan& plan, loom::SyncMode mode);
void setServers(loom::Plan& plan, int servers);

// Re-lays out `after.parallel.devices` for after's strategy from `before`'s: every rank
// whose (stage, replica) or server index existed before keeps its device; new ranks get
// the last device's kind and host (a fresh GPU index on that host for gpu devices).
// skipReplica / skipServer drop one replica or server from the old layout (removals).
void fitDevices(const loom::Plan& before, loom::Plan& after, int skipReplica = -1, int skipServer = -1);

// Device table operations: devices come in whole replicas (one per stage), because the
// plan needs exactly world_size devices; a server row removes that server.
void addReplica(loom::Plan& plan);
void removeDeviceAt(loom::Plan& plan, int rank);

// Whether a strategy field (a JSON pointer such as "/parallel/sync/bound") matters for
// the plan's current strategy: the form disables the others.
bool strategyFieldRelevant(const loom::Plan& plan, const QString& path);

// "stage 1 · replica 0", "server 0", or "unused" for a device beyond world_size.
QString rankRoleText(const loom::Plan& plan, int rank);

}  // namespace loom::ui
