// Strategy edits that keep the device list in step with the rank layout (strategy.h).
#include "loom/ui/designer/strategy.h"

#include <algorithm>
#include <functional>

namespace loom::ui {
namespace {

int servers_of(const loom::Plan& plan) { return usesServers(plan.parallel.sync.mode) ? plan.parallel.sync.servers : 0; }

// A device for a rank nobody had: same kind and host as the last one, and for GPUs the
// next index on that host not already taken, so NCCL never sees a GPU twice.
loom::DeviceSpec freshDevice(const std::vector<loom::DeviceSpec>& taken, const loom::DeviceSpec& last) {
  loom::DeviceSpec d;
  d.kind = last.kind;
  d.host = last.host.empty() ? "localhost" : last.host;
  if (d.kind == loom::DeviceKind::Gpu) {
    int next = 0;
    for (const loom::DeviceSpec& t : taken) {
      if (t.kind == loom::DeviceKind::Gpu && t.host == d.host) next = std::max(next, t.gpu + 1);
    }
    d.gpu = next;
  }
  return d;
}

// Index in before's device list of the device that should serve a rank, or -1.
int oldIndexFor(const loom::Plan& before, const loom::RankRole& role, int skipReplica, int skipServer) {
  const loom::ParallelSpec& p = before.parallel;
  if (p.data_parallel < 1 || p.stages < 1) return -1;
  int index = -1;
  if (role.kind == loom::RankKind::Worker) {
    const int replica = (skipReplica >= 0 && role.replica >= skipReplica) ? role.replica + 1 : role.replica;
    if (role.stage < p.stages && replica < p.data_parallel) index = role.stage * p.data_parallel + replica;
  } else if (role.kind == loom::RankKind::Server) {
    const int server = (skipServer >= 0 && role.server >= skipServer) ? role.server + 1 : role.server;
    if (server < servers_of(before)) index = p.data_parallel * p.stages + server;
  }
  return index < static_cast<int>(p.devices.size()) ? index : -1;
}

}  // namespace

bool usesServers(loom::SyncMode mode) {
  return mode == loom::SyncMode::ParameterServer || mode == loom::SyncMode::Ssp;
}

void fitDevices(const loom::Plan& before, loom::Plan& after, int skipReplica, int skipServer) {
  const int ranks = loom::world_size(after);
  if (ranks < 1 || ranks > kMaxDesignerRanks || after.parallel.data_parallel < 1 || after.parallel.stages < 1) return;
  loom::DeviceSpec last = before.parallel.devices.empty() ? loom::DeviceSpec{} : before.parallel.devices.back();
  std::vector<loom::DeviceSpec> devices;
  std::vector<bool> fresh;
  for (int rank = 0; rank < ranks; ++rank) {
    const int old = oldIndexFor(before, loom::rank_role(after, rank), skipReplica, skipServer);
    devices.push_back(old >= 0 ? before.parallel.devices[static_cast<std::size_t>(old)] : loom::DeviceSpec{});
    fresh.push_back(old < 0);
  }
  // Fresh devices second, so their GPU indices avoid every device that was kept.
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (!fresh[i]) continue;
    std::vector<loom::DeviceSpec> taken;
    for (std::size_t j = 0; j < devices.size(); ++j) {
      if (!fresh[j] || j < i) taken.push_back(devices[j]);
    }
    devices[i] = freshDevice(taken, last);
  }
  after.parallel.devices = std::move(devices);
}

void setDataParallel(loom::Plan& plan, int degree) {
  const loom::Plan before = plan;
  plan.parallel.data_parallel = degree;
  fitDevices(before, plan);
}

void setStages(loom::Plan& plan, int stages) {
  const loom::Plan before = plan;
  plan.parallel.stages = stages;
  if (stages >= 1) {
    // Layers on a stage that disappeared go to the new last stage; keeping them there
    // would only produce "stage does not exist" errors the person did not cause.
    std::vector<loom::LayerSpec>& layers = plan.model.layers;
    std::function<void(std::vector<loom::LayerSpec>&)> clamp = [&](std::vector<loom::LayerSpec>& list) {
      for (loom::LayerSpec& l : list) {
        l.stage = std::min(l.stage, stages - 1);
        for (loom::BranchSpec& b : l.branches) {
          b.stage = std::min(b.stage, stages - 1);
          clamp(b.layers);
        }
      }
    };
    clamp(layers);
  }
  fitDevices(before, plan);
}

// The asynchronous modes replicate the whole model (core validation): picking one folds a
// pipeline back into one stage rather than leaving errors the person did not cause.
void setSyncMode(loom::Plan& plan, loom::SyncMode mode) {
  if (mode != loom::SyncMode::AllReduce) {
    setStages(plan, 1);
    plan.parallel.microbatches = 1;
  }
  const loom::Plan before = plan;
  plan.parallel.sync.mode = mode;
  fitDevices(before, plan);
}

void setServers(loom::Plan& plan, int servers) {
  const loom::Plan before = plan;
  plan.parallel.sync.servers = servers;
  fitDevices(before, plan);
}

void addReplica(loom::Plan& plan) { setDataParallel(plan, plan.parallel.data_parallel + 1); }

void removeDeviceAt(loom::Plan& plan, int rank) {
  const loom::RankRole role = loom::rank_role(plan, rank);
  const loom::Plan before = plan;
  if (role.kind == loom::RankKind::Worker && plan.parallel.data_parallel > 1) {
    plan.parallel.data_parallel -= 1;
    fitDevices(before, plan, role.replica, -1);
  } else if (role.kind == loom::RankKind::Server && plan.parallel.sync.servers > 1) {
    plan.parallel.sync.servers -= 1;
    fitDevices(before, plan, -1, role.server);
  } else if (role.kind == loom::RankKind::Unused && rank >= 0 && rank < static_cast<int>(plan.parallel.devices.size())) {
    plan.parallel.devices.erase(plan.parallel.devices.begin() + rank);  // a surplus entry: just drop it
  }
}

bool strategyFieldRelevant(const loom::Plan& plan, const QString& path) {
  const loom::ParallelSpec& p = plan.parallel;
  if (path == QLatin1String("/parallel/microbatches") || path == QLatin1String("/parallel/schedule")) return p.stages > 1;
  if (path == QLatin1String("/parallel/sync/bound")) return p.sync.mode == loom::SyncMode::Ssp;
  if (path == QLatin1String("/parallel/sync/period")) return p.sync.mode == loom::SyncMode::LocalSgd;
  if (path == QLatin1String("/parallel/sync/servers") || path == QLatin1String("/parallel/sync/staleness_aware_lr")) {
    return usesServers(p.sync.mode);
  }
  if (path == QLatin1String("/parallel/bucket_mb")) return p.sync.mode == loom::SyncMode::AllReduce && p.data_parallel > 1;
  if (path == QLatin1String("/training/epochs")) return plan.training.steps == 0;
  if (path == QLatin1String("/training/optimizer/momentum")) return plan.training.optimizer.kind == loom::OptimizerKind::Momentum;
  return true;
}

QString rankRoleText(const loom::Plan& plan, int rank) {
  const loom::RankRole role = loom::rank_role(plan, rank);
  switch (role.kind) {
    case loom::RankKind::Worker:
      return QStringLiteral("stage %1 \u00b7 replica %2").arg(role.stage).arg(role.replica);
    case loom::RankKind::Server: return QStringLiteral("server %1").arg(role.server);
    case loom::RankKind::InferenceServer: return QStringLiteral("inference server");
    case loom::RankKind::Client: return QStringLiteral("client %1").arg(rank);
    default: return QStringLiteral("unused");
  }
}

}  // namespace loom::ui
