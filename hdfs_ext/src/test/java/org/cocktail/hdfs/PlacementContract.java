package org.cocktail.hdfs;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.DFSTestUtil;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.web.WebHdfsConstants;
import org.apache.hadoop.hdfs.web.WebHdfsTestUtil;
import org.junit.AfterClass;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TestName;
import org.junit.rules.Timeout;

/**
 * What both routes must guarantee for writes on a healthy cluster of 3 private and 3 public
 * datanodes. Subclasses start one cluster per class.
 */
public abstract class PlacementContract {

  static final int PRIVATE_DATANODES = 3;
  static final int PUBLIC_DATANODES = 3;

  @Rule
  public final Timeout timeout = Timeout.seconds(120);
  @Rule
  public final TestName name = new TestName();

  /** One cluster per test class (started by its first test, stopped after its last). */
  private static CocktailMiniCluster shared;

  protected abstract Route route();

  @Before
  public void startClusterOnce() throws IOException {
    if (shared == null) {
      shared = startCluster(route(), getClass().getSimpleName());
    }
  }

  @AfterClass
  public static void stopCluster() {
    if (shared != null) {
      shared.close();
      shared = null;
    }
  }

  protected CocktailMiniCluster cluster() {
    return shared;
  }

  static CocktailMiniCluster startCluster(Route route, String testClass) throws IOException {
    return CocktailMiniCluster.start(new CocktailMiniCluster.Options()
        .route(route)
        .privateDatanodes(PRIVATE_DATANODES)
        .publicDatanodes(PUBLIC_DATANODES)
        .baseDir(TestDirs.forClass(testClass)));
  }

  Path privatePath(String child) {
    return new Path(cluster().privateRoot() + "/" + name.getMethodName() + "/" + child);
  }

  /**
   * Every replica of {@code path} is private, once it has {@code replicas} of them. A pipeline
   * may close a block short of a replica (a refused favored node, or on the COLD route a busy
   * moment of the storage-type search); the replication monitor then adds it, and that replica
   * must be private too.
   */
  void assertPrivatePlacement(Path path, int replicas) throws Exception {
    DistributedFileSystem fs = cluster().fs();
    DFSTestUtil.waitReplication(fs, path, (short) replicas);
    BlockLocation[] blocks = Blocks.locations(fs, path);
    Blocks.assertAllPrivate(blocks, replicas);
    if (cluster().route() == Route.COLD) {
      Blocks.assertStorage(blocks, StorageType.ARCHIVE);
    }
  }

  @Test
  public void everyReplicaOfAPrivateFileIsOnAPrivateDatanode() throws Exception {
    DistributedFileSystem fs = cluster().fs();
    for (int replication : new int[] {2, 3}) {
      Path flat = privatePath("r" + replication);
      Path nested = privatePath("a/b/r" + replication);
      Blocks.write(fs, flat, replication, 3);
      Blocks.write(fs, nested, replication, 3);
      assertPrivatePlacement(flat, replication);
      assertPrivatePlacement(nested, replication);
    }
  }

  /** Sanity: the cluster does use public datanodes, so the private assertions can fail. */
  @Test
  public void publicFilesMayUsePublicDatanodes() throws IOException {
    DistributedFileSystem fs = cluster().fs();
    for (String file : new String[] {"/cocktail/public/f", cluster().privateRoot() + "foo/f"}) {
      Path path = new Path(file);
      Blocks.write(fs, path, 3, 4);
      BlockLocation[] blocks = Blocks.locations(fs, path);
      assertFalse(file + " never used a public datanode: " + Blocks.describe(blocks),
          Blocks.publicReplicas(blocks).isEmpty());
    }
  }

  @Test
  public void publicFavoredNodesAreNotUsedForPrivateFiles() throws Exception {
    DistributedFileSystem fs = cluster().fs();
    InetSocketAddress[] favored = publicDatanodeAddresses();

    Path publicPath = new Path("/cocktail/public/favored");
    writeWithFavoredNodes(fs, publicPath, favored);
    // A pipeline may close a block one replica short (seen on the COLD route): wait for the
    // namenode to re-replicate it before counting.
    DFSTestUtil.waitReplication(fs, publicPath, (short) 3);
    BlockLocation[] publicBlocks = Blocks.locations(fs, publicPath);
    assertEquals("favored nodes were not honoured for a public file: "
        + Blocks.describe(publicBlocks), 3 * publicBlocks.length,
        Blocks.publicReplicas(publicBlocks).size());

    Path privatePath = privatePath("favored");
    writeWithFavoredNodes(fs, privatePath, favored);
    assertPrivatePlacement(privatePath, 3);
  }

  @Test
  public void aPrivateFileCreatedThroughWebHdfsIsOnPrivateDatanodesOnly() throws Exception {
    FileSystem web = WebHdfsTestUtil.getWebHdfsFileSystem(cluster().conf(),
        WebHdfsConstants.WEBHDFS_SCHEME);
    Path path = privatePath("web");
    try (FSDataOutputStream out = web.create(path, FsPermission.getFileDefault(), true, 4096,
        (short) 2, Blocks.BLOCK_SIZE, null)) {
      Blocks.fill(out, 3);
    }
    assertEquals(3, Blocks.locations(cluster().fs(), path).length);
    assertPrivatePlacement(path, 2);
  }

  InetSocketAddress[] publicDatanodeAddresses() throws IOException {
    List<InetSocketAddress> addresses = new ArrayList<>();
    for (int i = 0; i < cluster().size(); i++) {
      if (!cluster().isPrivate(i)) {
        // Unresolved, so that the namenode gets the IP it keys datanodes by, not "localhost".
        addresses.add(InetSocketAddress.createUnresolved(cluster().report(i).getIpAddr(),
            cluster().report(i).getXferPort()));
      }
    }
    assertTrue(addresses.size() >= 3);
    return addresses.toArray(new InetSocketAddress[0]);
  }

  private static void writeWithFavoredNodes(DistributedFileSystem fs, Path path,
      InetSocketAddress[] favored) throws IOException {
    try (FSDataOutputStream out = fs.create(path, FsPermission.getFileDefault(), true, 4096,
        (short) 3, Blocks.BLOCK_SIZE, null, favored)) {
      Blocks.fill(out, 3);
    }
  }
}
