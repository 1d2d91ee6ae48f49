package org.cocktail.hdfs;

import java.io.File;
import java.io.IOException;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeLabel;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.resourcemanager.RMContext;
import org.apache.hadoop.yarn.server.resourcemanager.nodelabels.RMNodeLabelsManager;
import org.apache.hadoop.yarn.server.resourcemanager.rmnode.RMNode;

/**
 * MiniMRYarnCluster with two NodeManagers sized for a 2-core machine, YARN node labels on, and
 * the exclusive label {@value #PRIVATE_LABEL} on NodeManager 0: map tasks asking for that label
 * run only there, everything unlabelled runs on NodeManager 1.
 *
 * <p>MiniYARNCluster keeps its work dirs under the system property test.build.data.
 */
final class YarnCluster implements AutoCloseable {

  static final String PRIVATE_LABEL = "private";
  static final String NAME = "cocktail-yarn";
  private static final String CAPACITY = "yarn.scheduler.capacity.";
  private static final String TASK_MB = "512";
  /** Containers live seconds: C1 and one GC thread (cocktail.jvm.SHORT_LIVED). */
  private static final String TASK_OPTS = "-Xmx384m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC";
  private static final long HEALTHY_WITHIN_MS = 30_000;
  private static final int NODE_MANAGERS = 2;

  private final MiniMRYarnCluster cluster;

  private YarnCluster(MiniMRYarnCluster cluster) {
    this.cluster = cluster;
  }

  /**
   * Starts on top of the HDFS whose configuration is given (fs.defaultFS). A NodeManager is
   * healthy while its disk is used up to {@code maxDiskPercent}; the start fails, with the
   * NodeManagers' own health reports, unless both are.
   */
  static YarnCluster start(Configuration hdfsConf, File baseDir, float maxDiskPercent)
      throws IOException, InterruptedException {
    Configuration conf = new YarnConfiguration(hdfsConf);
    resources(conf);
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, maxDiskPercent);
    labels(conf, baseDir);
    MiniMRYarnCluster cluster = new MiniMRYarnCluster(NAME, NODE_MANAGERS);
    YarnCluster yarn = new YarnCluster(cluster);
    try {
      cluster.init(conf);
      cluster.start();
      if (!cluster.waitForNodeManagersToConnect(60_000)) {
        throw new IOException("the NodeManagers did not register in 60 s");
      }
      yarn.awaitHealthy();
      yarn.labelNodeManager0();
    } catch (IOException | InterruptedException | RuntimeException e) {
      yarn.close();
      throw e;
    } catch (Exception e) {
      yarn.close();
      throw new IOException(e);
    }
    return yarn;
  }

  /**
   * Both NodeManagers RUNNING. An UNHEALTHY one (its disk over the limit, say) would take no
   * container, and every job would wait ACCEPTED for ever: fail now, saying why.
   */
  private void awaitHealthy() throws IOException, InterruptedException {
    long deadline = System.currentTimeMillis() + HEALTHY_WITHIN_MS;
    while (true) {
      Collection<RMNode> nodes =
          cluster.getResourceManager().getRMContext().getRMNodes().values();
      List<RMNode> unhealthy = nodes.stream()
          .filter(node -> node.getState() == NodeState.UNHEALTHY).toList();
      if (!unhealthy.isEmpty()) {
        throw new IOException("NodeManager(s) UNHEALTHY, no job could run: " + unhealthy.stream()
            .map(node -> node.getNodeID() + ": " + node.getHealthReport())
            .collect(Collectors.joining("; ")));
      }
      long running = nodes.stream().filter(node -> node.getState() == NodeState.RUNNING).count();
      if (running == NODE_MANAGERS) {
        return;
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IOException("the NodeManagers are not RUNNING after "
            + HEALTHY_WITHIN_MS / 1000 + " s: " + nodes.stream()
            .map(node -> node.getNodeID() + " " + node.getState())
            .collect(Collectors.joining(", ")));
      }
      Thread.sleep(100);
    }
  }

  /** Two 4 GiB NodeManagers and 512 MiB containers: an AM and several tasks fit on 2 cores. */
  private static void resources(Configuration conf) {
    conf.set(YarnConfiguration.YARN_MINICLUSTER_NM_PMEM_MB, "4096");
    conf.set(YarnConfiguration.NM_PMEM_MB, "4096");
    conf.set(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, "128");
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.set("yarn.app.mapreduce.am.resource.mb", TASK_MB);
    conf.set("yarn.app.mapreduce.am.command-opts", TASK_OPTS);
    conf.set("mapreduce.map.memory.mb", TASK_MB);
    conf.set("mapreduce.reduce.memory.mb", TASK_MB);
    conf.set("mapreduce.map.java.opts", TASK_OPTS);
    conf.set("mapreduce.reduce.java.opts", TASK_OPTS);
    // Containers run $JAVA_HOME/bin/java; the launcher's environment may not define it.
    conf.set(YarnConfiguration.NM_ADMIN_USER_ENV, "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,JAVA_HOME="
        + System.getProperty("java.home"));
    // Aggregated logs leave the NodeManagers at once; local ones would be kept 3 h and stall
    // every NodeManager's shutdown by ~17 s (pending log deletion, running-app wait).
    conf.setBoolean(YarnConfiguration.LOG_AGGREGATION_ENABLED, true);
    conf.setLong(YarnConfiguration.NM_PROCESS_KILL_WAIT_MS, 1000);
    conf.set(CAPACITY + "root.queues", "default");
    conf.set(CAPACITY + "root.default.capacity", "100");
    conf.set(CAPACITY + "maximum-am-resource-percent", "0.5");
  }

  private static void labels(Configuration conf, File baseDir) {
    conf.setBoolean(YarnConfiguration.NODE_LABELS_ENABLED, true);
    conf.set(YarnConfiguration.NODELABEL_CONFIGURATION_TYPE,
        YarnConfiguration.CENTRALIZED_NODELABEL_CONFIGURATION_TYPE);
    conf.set(YarnConfiguration.FS_NODE_LABELS_STORE_ROOT_DIR,
        new File(baseDir, "node-labels").toURI().toString());
  }

  /**
   * Queue keys that mention a label are only accepted once the label exists, so the label is
   * created first and the scheduler re-read afterwards.
   */
  private void labelNodeManager0() throws IOException {
    RMContext rm = cluster.getResourceManager().getRMContext();
    RMNodeLabelsManager labels = rm.getNodeLabelManager();
    labels.addToCluserNodeLabels(List.of(NodeLabel.newInstance(PRIVATE_LABEL, true)));
    Configuration conf = cluster.getConfig();
    for (String queue : new String[] {"root", "root.default"}) {
      conf.set(CAPACITY + queue + ".accessible-node-labels", PRIVATE_LABEL);
      conf.set(CAPACITY + queue + ".accessible-node-labels." + PRIVATE_LABEL + ".capacity", "100");
    }
    rm.getScheduler().reinitialize(new Configuration(conf), rm);
    labels.addLabelsToNode(Map.of(privateNode(), Set.of(PRIVATE_LABEL)));
  }

  NodeId privateNode() {
    return cluster.getNodeManager(0).getNMContext().getNodeId();
  }

  NodeId publicNode() {
    return cluster.getNodeManager(1).getNMContext().getNodeId();
  }

  /** The live configuration (RM, scheduler and history server addresses filled in). */
  Configuration conf() {
    return cluster.getConfig();
  }

  /** host:port of the ResourceManager's client RPC address. */
  String resourceManagerAddress() {
    return conf().get(YarnConfiguration.RM_ADDRESS);
  }

  @Override
  public void close() {
    cluster.stop();
  }
}
