package org.cocktail.hdfs;

import java.io.File;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeoutException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSCluster.DataNodeProperties;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.HdfsConstants.DatanodeReportType;
import org.apache.hadoop.hdfs.server.datanode.DataNode;
import org.apache.hadoop.net.StaticMapping;

/**
 * A MiniDFSCluster with private datanodes (racks /private/rN, storage DISK+ARCHIVE) followed by
 * public ones (racks /public/rN, DISK+DISK), set up for one {@link Route}. Datanodes keep their
 * index across stop/restart, unlike MiniDFSCluster's own list.
 *
 * <p>Datanode i registers under the hostname 127.0.0.(i+2) and listens on all addresses: racks
 * are resolved by hostname (so every datanode needs its own), and WebHDFS redirects to that
 * hostname, which must then be reachable from outside the JVM too.
 */
public final class CocktailMiniCluster implements AutoCloseable {

  public static final String DEFAULT_PRIVATE_ROOT = "/cocktail/private";
  public static final long MIN_BLOCK_SIZE = 64 * 1024;

  /** What to start. */
  public static final class Options {
    Route route = Route.SHIM;
    int privateDatanodes = 2;
    int publicDatanodes = 3;
    int replication = 2;
    String privateRoot = DEFAULT_PRIVATE_ROOT;
    File baseDir;

    public Options route(Route value) {
      route = value;
      return this;
    }

    public Options privateDatanodes(int value) {
      privateDatanodes = value;
      return this;
    }

    public Options publicDatanodes(int value) {
      publicDatanodes = value;
      return this;
    }

    public Options replication(int value) {
      replication = value;
      return this;
    }

    public Options privateRoot(String value) {
      privateRoot = value;
      return this;
    }

    public Options baseDir(File value) {
      baseDir = value;
      return this;
    }
  }

  private final Options options;
  private final MiniDFSCluster dfs;
  private final Map<Integer, DataNodeProperties> stopped = new HashMap<>();

  private CocktailMiniCluster(Options options, MiniDFSCluster dfs) {
    this.options = options;
    this.dfs = dfs;
  }

  public static CocktailMiniCluster start(Options options) throws IOException {
    int size = options.privateDatanodes + options.publicDatanodes;
    Configuration conf = configuration(options);
    StaticMapping.resetMap();
    MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf)
        .numDataNodes(size)
        .racks(racks(options))
        .hosts(hostnames(size))
        .storagesPerDatanode(2)
        .storageTypes(storageTypes(options))
        .checkDataNodeAddrConfig(true)
        .dataNodeConfOverlays(fixedAddresses(size))
        .build();
    CocktailMiniCluster cluster = new CocktailMiniCluster(options, dfs);
    try {
      dfs.waitActive();
      options.route.prepare(dfs.getFileSystem(), options.privateRoot);
    } catch (IOException | RuntimeException e) {
      cluster.close();
      throw e;
    }
    return cluster;
  }

  private static Configuration configuration(Options options) {
    Configuration conf = new HdfsConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(options.baseDir, "dfs").getAbsolutePath());
    conf.setInt(DFSConfigKeys.DFS_REPLICATION_KEY, options.replication);
    conf.setLong(DFSConfigKeys.DFS_NAMENODE_MIN_BLOCK_SIZE_KEY, MIN_BLOCK_SIZE);
    conf.setBoolean(DFSConfigKeys.DFS_PERMISSIONS_ENABLED_KEY, true);
    // With a handful of idle datanodes, one busy transfer is "twice the average load" and the
    // only spare private datanode would be refused.
    conf.setBoolean(DFSConfigKeys.DFS_NAMENODE_REDUNDANCY_CONSIDERLOAD_KEY, false);
    // A stopped datanode is declared dead after 2 * recheck + 10 * heartbeat = 11 s.
    conf.setLong(DFSConfigKeys.DFS_HEARTBEAT_INTERVAL_KEY, 1);
    conf.setInt(DFSConfigKeys.DFS_NAMENODE_HEARTBEAT_RECHECK_INTERVAL_KEY, 500);
    conf.setInt(DFSConfigKeys.DFS_NAMENODE_REDUNDANCY_INTERVAL_SECONDS_KEY, 1);
    conf.setInt(DFSConfigKeys.DFS_NAMENODE_RECONSTRUCTION_PENDING_TIMEOUT_SEC_KEY, 5);
    conf.set(PrivateRackPlacementPolicy.PRIVATE_ROOT_KEY, options.privateRoot);
    options.route.configure(conf);
    return conf;
  }

  private static String[] racks(Options options) {
    List<String> racks = new ArrayList<>();
    for (int i = 1; i <= options.privateDatanodes; i++) {
      racks.add("/private/r" + i);
    }
    for (int i = 1; i <= options.publicDatanodes; i++) {
      racks.add("/public/r" + i);
    }
    return racks.toArray(new String[0]);
  }

  private static String[] hostnames(int size) {
    String[] hosts = new String[size];
    for (int i = 0; i < size; i++) {
      hosts[i] = hostname(i);
    }
    return hosts;
  }

  static String hostname(int index) {
    return "127.0.0." + (index + 2);
  }

  private static StorageType[][] storageTypes(Options options) {
    StorageType[][] types = new StorageType[options.privateDatanodes + options.publicDatanodes][];
    for (int i = 0; i < types.length; i++) {
      types[i] = i < options.privateDatanodes
          ? new StorageType[] {StorageType.DISK, StorageType.ARCHIVE}
          : new StorageType[] {StorageType.DISK, StorageType.DISK};
    }
    return types;
  }

  /**
   * Ports chosen up front, so that a restarted datanode comes back on the same addresses
   * (MiniDFSCluster's keepPort cannot rebuild a wildcard address on an IPv6-enabled JVM).
   */
  private static Configuration[] fixedAddresses(int size) throws IOException {
    int[] ports = freePorts(3 * size);
    Configuration[] overlays = new Configuration[size];
    for (int i = 0; i < size; i++) {
      overlays[i] = new Configuration(false);
      overlays[i].set(DFSConfigKeys.DFS_DATANODE_ADDRESS_KEY, "0.0.0.0:" + ports[3 * i]);
      overlays[i].set(DFSConfigKeys.DFS_DATANODE_HTTP_ADDRESS_KEY, "0.0.0.0:" + ports[3 * i + 1]);
      overlays[i].set("dfs.datanode.ipc.address", "127.0.0.1:" + ports[3 * i + 2]);
    }
    return overlays;
  }

  /**
   * Distinct free ports below Linux's ephemeral range (32768+), so that no server binding port 0
   * and no outgoing connection can take one of them before its datanode starts.
   */
  private static int[] freePorts(int count) throws IOException {
    Set<Integer> ports = new LinkedHashSet<>();
    Random random = new Random();
    for (int attempt = 0; ports.size() < count && attempt < 1000; attempt++) {
      int port = 20000 + random.nextInt(12000);
      if (!ports.contains(port) && isFree(port)) {
        ports.add(port);
      }
    }
    if (ports.size() < count) {
      throw new IOException("could not find " + count + " free ports in 20000-31999");
    }
    return ports.stream().mapToInt(Integer::intValue).toArray();
  }

  private static boolean isFree(int port) {
    try (ServerSocket socket = new ServerSocket()) {
      socket.bind(new InetSocketAddress("0.0.0.0", port));
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  public MiniDFSCluster dfs() {
    return dfs;
  }

  public DistributedFileSystem fs() throws IOException {
    return dfs.getFileSystem();
  }

  /** The namenode's configuration (addresses filled in). */
  public Configuration conf() {
    return dfs.getConfiguration(0);
  }

  public Route route() {
    return options.route;
  }

  public String privateRoot() {
    return options.privateRoot;
  }

  public int replication() {
    return options.replication;
  }

  public int size() {
    return options.privateDatanodes + options.publicDatanodes;
  }

  public boolean isPrivate(int index) {
    return index < options.privateDatanodes;
  }

  public String rack(int index) {
    return racks(options)[index];
  }

  public StorageType[] storageTypes(int index) {
    return storageTypes(options)[index];
  }

  /** The running datanode with this index, or null when it is stopped. */
  public DataNode datanode(int index) {
    for (DataNode dn : dfs.getDataNodes()) {
      if (dn.getDatanodeId().getHostName().equals(hostname(index))) {
        return dn;
      }
    }
    return null;
  }

  /** The namenode's view of a live datanode (hostname and IP as clients see them), or null. */
  public DatanodeInfo report(int index) throws IOException {
    DataNode dn = datanode(index);
    if (dn == null) {
      return null;
    }
    for (DatanodeInfo info : fs().getDataNodeStats(DatanodeReportType.LIVE)) {
      if (info.getXferPort() == dn.getXferPort()) {
        return info;
      }
    }
    return null;
  }

  /** Stops datanode {@code index}; with {@code markDead} the namenode declares it dead at once. */
  public void stopDatanode(int index, boolean markDead) throws IOException {
    DataNode dn = running(index);
    DataNodeProperties properties = dfs.stopDataNode(dfs.getDataNodes().indexOf(dn));
    stopped.put(index, properties);
    if (markDead) {
      dfs.setDataNodeDead(dn.getDatanodeId());
    }
  }

  /**
   * Restarts a stopped datanode on its old ports and waits until the namenode has its block
   * report (before that its storages are not usable as targets).
   */
  public void restartDatanode(int index) throws IOException {
    DataNodeProperties properties = stopped.remove(index);
    if (properties == null) {
      throw new IllegalStateException("datanode " + index + " is not stopped");
    }
    dfs.restartDataNode(properties, false);
    dfs.waitActive();
    try {
      dfs.waitFirstBRCompleted(0, 30_000);
    } catch (TimeoutException e) {
      throw new IOException("datanode " + index + " sent no block report in 30 s", e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    }
  }

  private DataNode running(int index) {
    DataNode dn = datanode(index);
    if (dn == null) {
      throw new IllegalStateException("datanode " + index + " is not running");
    }
    return dn;
  }

  @Override
  public void close() {
    dfs.shutdown();
  }
}
