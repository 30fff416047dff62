// Oversubscription detected from the plan's hosts and the cores known per host: this
// machine under every name it goes by, other hosts with and without known cores, the
// sentence said to the user, the worst host, and the cgroup quota's arithmetic.
#include <QtTest>

#include "loom/host/oversubscription.h"
#include "loom/test/plans.h"

using namespace loom;
using namespace loom::host;
using loom::testing::plan_with_hosts;

class TestOversubscription : public QObject {
  Q_OBJECT
 private slots:
  void hosts_and_cores_data() {
    QTest::addColumn<QStringList>("hosts");  // one per rank
    QTest::addColumn<int>("local_cores");
    QTest::addColumn<QString>("known");      // "host=cores,..." for other hosts
    QTest::addColumn<QString>("expected");   // "host:ranks/cores[!]" per host, ! = oversubscribed
    QTest::newRow("one rank") << QStringList{"localhost"} << 2 << "" << "localhost:1/2";
    QTest::newRow("as many ranks as cores") << QStringList(2, "localhost") << 2 << "" << "localhost:2/2";
    QTest::newRow("4 ranks on 2 cores") << QStringList(4, "localhost") << 2 << "" << "localhost:4/2!";
    QTest::newRow("3 ranks on 2 cores") << QStringList(3, "localhost") << 2 << "" << "localhost:3/2!";
    QTest::newRow("2 ranks on 1 core") << QStringList(2, "localhost") << 1 << "" << "localhost:2/1!";
    QTest::newRow("every name of this machine")
        << QStringList{"localhost", "127.0.0.1", "node0", "::1"} << 4 << "" << "localhost:4/4";
    QTest::newRow("other host unknown") << QStringList{"localhost", "node1", "node1", "node1"} << 2 << ""
                                        << "localhost:1/2 node1:3/?";
    QTest::newRow("other host known, within") << QStringList{"node1", "node1", "localhost"} << 1 << "node1=2"
                                              << "node1:2/2 localhost:1/1";
    QTest::newRow("other host known, over") << QStringList{"node1", "node1", "node1", "localhost"} << 8 << "node1=2"
                                            << "node1:3/2! localhost:1/8";
    QTest::newRow("local cores unknown") << QStringList(4, "localhost") << 0 << "" << "localhost:4/?";
  }

  void hosts_and_cores() {
    QFETCH(QStringList, hosts);
    QFETCH(int, local_cores);
    QFETCH(QString, known);
    QFETCH(QString, expected);
    std::vector<std::string> names;
    for (const QString& h : hosts) names.push_back(h.toStdString());
    std::map<std::string, int> known_cores;
    for (const QString& item : known.split(',', Qt::SkipEmptyParts))
      known_cores[item.section('=', 0, 0).toStdString()] = item.section('=', 1, 1).toInt();
    const Oversubscription o = detect_oversubscription(plan_with_hosts(names), "node0", local_cores, known_cores);
    QStringList got;
    for (const HostLoad& h : o.hosts) {
      got << QString("%1:%2/%3%4")
                 .arg(QString::fromStdString(h.host))
                 .arg(h.ranks)
                 .arg(h.cores > 0 ? QString::number(h.cores) : QString("?"))
                 .arg(h.oversubscribed() ? "!" : "");
    }
    QCOMPARE(got.join(' '), expected);
    QCOMPARE(o.any(), expected.contains('!'));
    QCOMPARE(o.messages().size(), std::size_t(expected.count('!')));
    QCOMPARE(o.worst() != nullptr, o.any());
  }

  void message_says_what_it_does_to_timings() {
    const Oversubscription o = detect_oversubscription(plan_with_hosts(std::vector<std::string>(4, "localhost")), "x", 2);
    QCOMPARE(o.messages().size(), std::size_t(1));
    QCOMPARE(o.messages()[0],
             std::string("4 ranks share 2 cores on localhost: ranks take turns on the cores, so step times and "
                         "communication waits include time a rank waited for a core; expect lower throughput than 1 "
                         "process"));
    const Oversubscription one = detect_oversubscription(plan_with_hosts({"a", "a"}), "x", 4, {{"a", 1}});
    QVERIFY(one.messages()[0].rfind("2 ranks share 1 core on a:", 0) == 0);
  }

  // Simulated hosts (network namespaces of this machine) share its cores: their ranks
  // count with this machine's, as one load, where mpirun counts them by name, apart.
  void namespace_hosts_share_this_machines_cores() {
    const std::string machine = "this machine, whose network namespaces the plan names as hosts (loom-a, loom-b)";
    const Plan three = plan_with_hosts({"loom-a", "loom-b", "loom-b"});
    const Oversubscription crowded = detect_oversubscription(three, "x", 2, {}, {"loom-a", "loom-b"});
    QCOMPARE(crowded.hosts.size(), std::size_t(1));
    QCOMPARE(crowded.hosts[0].host, machine);
    QCOMPARE(crowded.hosts[0].ranks, 3);
    QCOMPARE(crowded.messages().at(0).rfind("3 ranks share 2 cores on " + machine + ": ranks take turns", 0),
             std::size_t(0));
    // With this machine's own ranks, and beside a real host; one namespace not known as such.
    const Plan mixed = plan_with_hosts({"localhost", "loom-a", "node7", "loom-c"});
    const Oversubscription m = detect_oversubscription(mixed, "x", 4, {}, {"loom-a"});
    QCOMPARE(m.hosts.size(), std::size_t(3));
    QCOMPARE(m.hosts[0].ranks, 2);
    QCOMPARE(m.hosts[0].cores, 4);
    QVERIFY(m.hosts[0].host.find("(loom-a)") != std::string::npos);
    QCOMPARE(m.hosts[1].host, std::string("node7"));
    QCOMPARE(m.hosts[2].host, std::string("loom-c"));
    QVERIFY(!m.any());
    // Not namespaces here: two hosts of unknown cores, nothing said.
    QVERIFY(!detect_oversubscription(three, "x", 2).any());
  }

  void namespace_hosts_are_found_where_ip_netns_puts_them() {
    QTemporaryDir netns;
    QVERIFY(netns.isValid());
    for (const char* name : {"loom-a", "loom-c"}) {
      QFile file(netns.filePath(name));
      QVERIFY(file.open(QIODevice::WriteOnly));
    }
    const Plan plan = plan_with_hosts({"localhost", "loom-a", "loom-b", "loom-c", "loom-a", "../etc"});
    const std::set<std::string> expected = {"loom-a", "loom-c"};
    QCOMPARE(namespace_hosts(plan, netns.path().toStdString()), expected);
    QVERIFY(namespace_hosts(plan, netns.filePath("absent").toStdString()).empty());
  }

  void worst_host_has_most_ranks_per_core() {
    // a: 3 on 2 (1.5 per core), b: 5 on 3 (1.67), this machine 2 on 1 (2.0)
    std::vector<std::string> hosts = {"a", "a", "a", "b", "b", "b", "b", "b", "localhost", "localhost"};
    const Oversubscription o = detect_oversubscription(plan_with_hosts(hosts), "x", 1, {{"a", 2}, {"b", 3}});
    QVERIFY(o.worst());
    QCOMPARE(o.worst()->host, std::string("localhost"));
    QCOMPARE(o.messages().size(), std::size_t(3));
  }

  void servers_count_as_ranks() {
    Plan plan = plan_with_hosts({"localhost", "localhost"});
    plan.parallel.sync.mode = SyncMode::ParameterServer;
    plan.parallel.devices.push_back(DeviceSpec{});  // the server rank
    const Oversubscription o = detect_oversubscription(plan, "x", 2);
    QCOMPARE(o.hosts.at(0).ranks, 3);
    QVERIFY(o.any());
  }

  void cgroup_quota() {
    QCOMPARE(cores_from_cpu_max("max 100000\n"), 0);
    QCOMPARE(cores_from_cpu_max("200000 100000\n"), 2);
    QCOMPARE(cores_from_cpu_max("150000 100000"), 1);  // 2 ranks on 1.5 cores still take turns
    QCOMPARE(cores_from_cpu_max("50000 100000"), 1);
    QCOMPARE(cores_from_cpu_max(""), 0);
    QCOMPARE(cores_from_cpu_max("garbage"), 0);
    QVERIFY(cores_available() >= 1);
  }
};

QTEST_GUILESS_MAIN(TestOversubscription)
#include "test_oversubscription.moc"
