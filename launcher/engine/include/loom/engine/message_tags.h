// Every MPI tag the engine's point-to-point messages use, in one place so that no two
// protocols share one by accident (collectives carry none). All stay below 32767, the
// largest tag MPI guarantees.
#pragma once

namespace loom::engine {

// Rank probes before training (rank_probes.h): clock alignment, the bandwidth probe and
// each rank's host name, sent to rank 0 to find the hosts to probe.
inline constexpr int kClockTag = 9001;
inline constexpr int kProbeTag = 9002;
inline constexpr int kHostNameTag = 9003;
// A pipeline's final parameters gathered on rank 0 (pipeline_trainer.cpp), and its
// messages: the activations of value v on kPipelineTagBase + 2v, the gradients along edge
// e on kPipelineTagBase + 2e + 1 (under 2000 while a stage graph has under 500 values).
inline constexpr int kGatherTag = 999;
inline constexpr int kPipelineTagBase = 1000;
// Parameter servers (parameter_server.h): a request header, a pull's reply, a pushed
// gradient, and the final parameters sent to rank 0.
inline constexpr int kRequestTag = 2000;
inline constexpr int kParamsTag = 2001;
inline constexpr int kGradientTag = 2002;
inline constexpr int kFinalParamsTag = 2003;
// Serving (serving.h): a client's request and the server's reply.
inline constexpr int kServeRequestTag = 3000;
inline constexpr int kServeReplyTag = 3001;

}  // namespace loom::engine
