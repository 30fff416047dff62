// What the host tells each rank it launches, in environment variables (mpirun -x exports
// them to every rank, on every host): written by launcher/host's launch command, read by
// loom-rank's session. One list, so the two sides cannot drift apart.
#pragma once

namespace loom::stream {

// The stream endpoint the rank connects to, the run's secret it proves itself with, and
// the run's id. Without them a rank runs standalone and only prints its summary.
inline constexpr const char* kStreamEnv = "LOOM_STREAM";
inline constexpr const char* kSecretEnv = "LOOM_STREAM_SECRET";
inline constexpr const char* kRunIdEnv = "LOOM_RUN_ID";
// Checkpoints (engine/checkpoint.h): the directory this run's ranks save into, and the
// step directory a resumed run starts from. Unset, nothing is saved or resumed.
inline constexpr const char* kCheckpointDirEnv = "LOOM_CHECKPOINT_DIR";
inline constexpr const char* kResumeFromEnv = "LOOM_RESUME_FROM";
// Set to 1 where the host found more ranks than cores on a machine and said so before the
// launch (oversubscription.h), so that the ranks do not say it again.
inline constexpr const char* kCrowdingReportedEnv = "LOOM_CROWDING_REPORTED";

}  // namespace loom::stream
