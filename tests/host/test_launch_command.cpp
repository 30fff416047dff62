// The launch command built from a plan: flags for one machine, hostfile and bind address
// for several, srun under Slurm, environment for the live stream, and no shell anywhere.
#include <QtTest>

#include <algorithm>

#include "loom/host/launch_command.h"
#include "loom/test/plans.h"

using namespace loom;
using namespace loom::host;
using loom::testing::plan_with_hosts;

namespace {

LaunchContext context(int cores) {
  LaunchContext c;
  c.rank_executable = "/opt/loom dir/loom-rank";
  c.plan_path = "/tmp/run 7/plan.json";
  c.this_host = "node0";
  c.port = 4567;
  c.secret = std::string(64, 'a');
  c.run_id = 7;
  c.cores = cores;
  c.hostfile_path = "/tmp/run 7/hostfile";
  return c;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

std::string env_value(const LaunchCommand& c, const std::string& name) {
  for (const auto& [n, v] : c.env)
    if (n == name) return v;
  return "<unset>";
}

// The value after `flag` in the argument list.
std::string after(const std::vector<std::string>& v, const std::string& flag) {
  auto it = std::find(v.begin(), v.end(), flag);
  return it != v.end() && it + 1 != v.end() ? *(it + 1) : "<none>";
}

}  // namespace

class TestLaunchCommand : public QObject {
  Q_OBJECT
 private slots:
  void one_machine_within_cores() {
    const LaunchCommand c = build_launch_command(plan_with_hosts({"localhost", "localhost"}), context(2));
    QCOMPARE(c.program, std::string("mpirun"));
    QCOMPARE(after(c.args, "-n"), std::string("2"));
    QCOMPARE(after(c.args, "--bind-to"), std::string("none"));
    QVERIFY(!has(c.args, "--oversubscribe"));
    QVERIFY(!has(c.args, "--hostfile"));
    QVERIFY(c.hostfile_text.empty());
    QCOMPARE(c.bind_address, std::string("127.0.0.1"));
    QCOMPARE(c.stream_endpoint, std::string("127.0.0.1:4567"));
    // The rank executable and the plan are single arguments, spaces and all.
    QCOMPARE(c.args[c.args.size() - 2], std::string("/opt/loom dir/loom-rank"));
    QCOMPARE(c.args.back(), std::string("/tmp/run 7/plan.json"));
  }

  void more_ranks_than_cores_oversubscribe() {
    const LaunchCommand c = build_launch_command(plan_with_hosts({"localhost", "localhost", "node0", "127.0.0.1"}),
                                                 context(2));
    QVERIFY(has(c.args, "--oversubscribe"));
    QCOMPARE(after(c.args, "-n"), std::string("4"));
    QVERIFY(c.hostfile_text.empty());  // this machine under any of its names
  }

  // Ranks must give up the core while they wait whenever Loom knows a host holds more
  // ranks than cores, including where mpirun cannot see it (a hostfile's slots).
  void oversubscribed_ranks_yield_when_idle() {
    const std::string yield = "OMPI_MCA_mpi_yield_when_idle";
    auto exported = [&](const LaunchCommand& c) {
      for (std::size_t i = 0; i + 1 < c.args.size(); ++i)
        if (c.args[i] == "-x" && c.args[i + 1] == yield) return true;
      return false;
    };
    const LaunchCommand within = build_launch_command(plan_with_hosts({"localhost", "localhost"}), context(2));
    QCOMPARE(env_value(within, yield), std::string("<unset>"));
    const LaunchCommand over = build_launch_command(plan_with_hosts({"localhost", "localhost", "localhost"}), context(2));
    QCOMPARE(env_value(over, yield), std::string("1"));
    QVERIFY(exported(over));
    // 3 ranks here on 2 cores and one elsewhere: the hostfile says slots=3, no --oversubscribe.
    const LaunchCommand mixed =
        build_launch_command(plan_with_hosts({"localhost", "gpu-a", "localhost", "localhost"}), context(2));
    QVERIFY(!has(mixed.args, "--oversubscribe"));
    QCOMPARE(env_value(mixed, yield), std::string("1"));
    QVERIFY(exported(mixed));
    // Another host counts when its cores are known, and only then.
    const auto remote = plan_with_hosts({"gpu-a", "gpu-a", "gpu-a", "localhost"});
    QCOMPARE(env_value(build_launch_command(remote, context(2)), yield), std::string("<unset>"));
    LaunchContext known = context(2);
    known.host_cores["gpu-a"] = 2;
    QCOMPARE(env_value(build_launch_command(remote, known), yield), std::string("1"));
    // Hosts that are this machine's network namespaces share its cores: 3 ranks on 2.
    const auto simulated = plan_with_hosts({"loom-a", "loom-b", "loom-c"});
    QCOMPARE(env_value(build_launch_command(simulated, context(2)), yield), std::string("<unset>"));
    LaunchContext namespaces = context(2);
    namespaces.namespace_hosts = {"loom-a", "loom-b", "loom-c"};
    const LaunchCommand crowded = build_launch_command(simulated, namespaces);
    QCOMPARE(env_value(crowded, yield), std::string("1"));
    QVERIFY(exported(crowded));
    QCOMPARE(env_value(crowded, "LOOM_CROWDING_REPORTED"), std::string("1"));  // the ranks need not say it
    QVERIFY(!has(crowded.args, "--oversubscribe"));  // the hostfile's slots are the ranks placed
    QCOMPARE(env_value(over, "LOOM_CROWDING_REPORTED"), std::string("1"));
    QCOMPARE(env_value(within, "LOOM_CROWDING_REPORTED"), std::string("<unset>"));
    LaunchContext slurm = context(1);
    slurm.under_slurm = true;
    QCOMPARE(env_value(build_launch_command(plan_with_hosts({"localhost", "localhost"}), slurm), yield),
             std::string("1"));
  }

  void stream_environment_is_exported_to_every_rank() {
    const LaunchCommand c = build_launch_command(plan_with_hosts({"localhost", "localhost"}), context(2));
    QCOMPARE(env_value(c, "LOOM_STREAM"), std::string("127.0.0.1:4567"));
    QCOMPARE(env_value(c, "LOOM_STREAM_SECRET"), std::string(64, 'a'));
    QCOMPARE(env_value(c, "LOOM_RUN_ID"), std::string("7"));
    int exported = 0;
    for (std::size_t i = 0; i + 1 < c.args.size(); ++i) {
      if (c.args[i] == "-x" && (c.args[i + 1] == "LOOM_STREAM" || c.args[i + 1] == "LOOM_STREAM_SECRET" ||
                                c.args[i + 1] == "LOOM_RUN_ID"))
        ++exported;
    }
    QCOMPARE(exported, 3);
    // The secret is passed in the environment, never on the command line (ps shows that).
    for (const auto& a : c.args) QVERIFY(a.find(std::string(64, 'a')) == std::string::npos);
  }

  void root_gets_the_run_as_root_variables() {
    LaunchContext ctx = context(2);
    QCOMPARE(env_value(build_launch_command(plan_with_hosts({"localhost", "localhost"}), ctx), "OMPI_ALLOW_RUN_AS_ROOT"),
             std::string("<unset>"));
    ctx.running_as_root = true;
    const LaunchCommand c = build_launch_command(plan_with_hosts({"localhost", "localhost"}), ctx);
    QCOMPARE(env_value(c, "OMPI_ALLOW_RUN_AS_ROOT"), std::string("1"));
    QCOMPARE(env_value(c, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), std::string("1"));
  }

  void several_machines_get_a_hostfile() {
    const LaunchCommand c = build_launch_command(plan_with_hosts({"gpu-a", "gpu-b", "gpu-a", "localhost"}), context(2));
    QCOMPARE(after(c.args, "--hostfile"), std::string("/tmp/run 7/hostfile"));
    QVERIFY(c.hostfile_text.find("gpu-a slots=2\n") != std::string::npos);
    QVERIFY(c.hostfile_text.find("gpu-b slots=1\n") != std::string::npos);
    QVERIFY(c.hostfile_text.find("localhost slots=1\n") != std::string::npos);
    QVERIFY(!has(c.args, "--oversubscribe"));  // cores elsewhere are not ours to count
    QCOMPARE(c.bind_address, std::string("0.0.0.0"));
    QCOMPARE(c.stream_endpoint, std::string("node0:4567"));  // ranks elsewhere connect back by name
  }

  // Across hosts, messages up to the ring all-reduce's segment go without a rendezvous (a
  // handshake that waits behind the peer's own data); on one machine TCP carries nothing.
  void ranks_on_several_hosts_send_eagerly_over_tcp() {
    const std::string eager = "OMPI_MCA_btl_tcp_eager_limit";
    const LaunchCommand hosts = build_launch_command(plan_with_hosts({"gpu-a", "gpu-b"}), context(2));
    QCOMPARE(env_value(hosts, eager), std::to_string(4 * 1024 * 1024 + 4096));
    QVERIFY(std::find(hosts.args.begin(), hosts.args.end(), eager) != hosts.args.end());  // exported
    LaunchContext slurm = context(2);
    slurm.under_slurm = true;
    QCOMPARE(env_value(build_launch_command(plan_with_hosts({"localhost", "localhost"}), slurm), eager),
             std::to_string(4 * 1024 * 1024 + 4096));
    QCOMPARE(env_value(build_launch_command(plan_with_hosts({"localhost", "localhost"}), context(2)), eager),
             std::string("<unset>"));
  }

  void slurm_uses_srun_with_pmix() {
    LaunchContext ctx = context(2);
    ctx.under_slurm = true;
    const LaunchCommand c = build_launch_command(plan_with_hosts({"localhost", "localhost"}), ctx);
    QCOMPARE(c.program, std::string("srun"));
    QVERIFY(has(c.args, "--mpi=pmix"));
    QCOMPARE(after(c.args, "-n"), std::string("2"));
    QCOMPARE(env_value(c, "LOOM_STREAM_SECRET"), std::string(64, 'a'));
  }

  void description_quotes_and_masks_the_secret() {
    const std::string line = describe_command(build_launch_command(plan_with_hosts({"localhost", "localhost"}), context(2)));
    QVERIFY(line.find("'/opt/loom dir/loom-rank'") != std::string::npos);
    QVERIFY(line.find(std::string(64, 'a')) == std::string::npos);
    QVERIFY(line.find("LOOM_STREAM_SECRET=<secret>") != std::string::npos);
  }
};

QTEST_APPLESS_MAIN(TestLaunchCommand)
#include "test_launch_command.moc"
