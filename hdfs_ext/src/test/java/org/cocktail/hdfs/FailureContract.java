package org.cocktail.hdfs;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DFSOutputStream;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.client.HdfsClientConfigKeys.BlockWrite.ReplaceDatanodeOnFailure;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.protocol.LocatedBlock;
import org.apache.hadoop.test.GenericTestUtils;
import org.junit.After;
import org.junit.Before;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TestName;
import org.junit.rules.Timeout;

/**
 * What both routes must guarantee when private datanodes die: re-replication and pipeline repair
 * stay private, and with no private datanode left nothing goes public and writes fail.
 *
 * <p>Each test gets a fresh cluster: datanodes that one test killed and restarted (declared dead,
 * re-registered) would otherwise shape the next test's placement.
 */
public abstract class FailureContract {

  private static final long WAIT_MS = 30_000;

  @Rule
  public final Timeout timeout = Timeout.seconds(120);
  @Rule
  public final TestName name = new TestName();

  private CocktailMiniCluster cluster;

  protected abstract Route route();

  /** Hook for route-specific checks of the fail-closed write (e.g. the shim's log line). */
  protected void onFailedPrivateWrite(Path path, IOException failure) {
  }

  @Before
  public void startCluster() throws IOException {
    cluster = PlacementContract.startCluster(route(),
        getClass().getSimpleName() + "-" + name.getMethodName());
  }

  @After
  public void stopCluster() {
    if (cluster != null) {
      cluster.close();
    }
  }

  CocktailMiniCluster cluster() {
    return cluster;
  }

  Path privatePath(String child) {
    return new Path(cluster().privateRoot() + "/" + name.getMethodName() + "/" + child);
  }

  @Test
  public void aDeadPrivateDatanodeIsReplacedByAnotherPrivateDatanode() throws Exception {
    DistributedFileSystem fs = cluster().fs();
    Path path = privatePath("f");
    Blocks.write(fs, path, 2, 3);
    // close() returns once the pipeline has the bytes; a replica reaches the namenode's block
    // map with its datanode's next incremental block report (CI once saw one of two).
    waitForReplicas(path, 2);
    Blocks.assertAllPrivate(Blocks.locations(fs, path), 2);

    cluster().stopDatanode(privateIndexHolding(path), true);

    waitForReplicas(path, 2);
    Blocks.assertAllPrivate(Blocks.locations(fs, path), 2);
  }

  /**
   * The client replaces a failed pipeline datanode through getAdditionalDatanode: the replacement
   * must be private. Where the route may instead fail the write (closed), nothing may go public.
   */
  @Test
  public void aBrokenWritePipelineIsRepairedWithAPrivateDatanode() throws Exception {
    Configuration conf = new Configuration(cluster().conf());
    conf.set(ReplaceDatanodeOnFailure.POLICY_KEY, "ALWAYS");
    Path path = privatePath("f");
    IOException failure = null;
    try (FileSystem fs = FileSystem.newInstance(cluster().dfs().getURI(), conf)) {
      failure = writeThroughAPipelineFailure(fs, path);
    }
    if (failure != null) {
      if (!pipelineRepairMayFailClosed()) {
        throw failure;
      }
      assertNoPublicLocations(cluster().fs(), path);
      return;
    }
    assertEquals(4, Blocks.locations(cluster().fs(), path).length);
    // The first block was complete before the failure: re-replication, not the pipeline, fixes it.
    waitForReplicas(path, 2);
    Blocks.assertAllPrivate(Blocks.locations(cluster().fs(), path), 2);
  }

  /** Whether a write whose pipeline lost a datanode may fail rather than be repaired. */
  protected boolean pipelineRepairMayFailClosed() {
    return false;
  }

  /** Writes 4 blocks, killing a pipeline datanode after the first; the write's failure or null. */
  private IOException writeThroughAPipelineFailure(FileSystem fs, Path path) throws IOException {
    FSDataOutputStream out = fs.create(path, true, 4096, (short) 2, Blocks.BLOCK_SIZE);
    try {
      Blocks.fill(out, 1);
      out.write(1);
      out.hflush();
      DatanodeInfo[] pipeline = ((DFSOutputStream) out.getWrappedStream()).getPipeline();
      assertEquals(2, pipeline.length);
      cluster().stopDatanode(indexOf(pipeline[0]), true);
      Blocks.fill(out, 2);
      out.close();
      return null;
    } catch (IOException e) {
      return e;
    }
  }

  @Test
  public void withoutPrivateDatanodesNothingGoesPublicAndPrivateWritesFail() throws Exception {
    DistributedFileSystem fs = cluster().fs();
    Path path = privatePath("f");
    Blocks.write(fs, path, 2, 3);

    List<Integer> privates = privateIndexes();
    int survivor = privates.remove(privates.size() - 1);
    for (int index : privates) {
      cluster().stopDatanode(index, true);
    }
    // Several redundancy-monitor rounds in which re-replication could only go public.
    Thread.sleep(5_000);
    BlockLocation[] blocks = Blocks.locations(fs, path);
    assertEquals("replicas went public: " + Blocks.describe(blocks), 0,
        Blocks.publicReplicas(blocks).size());
    for (BlockLocation block : blocks) {
      assertTrue(block.getTopologyPaths().length <= 1);
    }

    cluster().stopDatanode(survivor, true);
    Path failing = privatePath("g");
    IOException failure = assertThrows(IOException.class, () -> Blocks.write(fs, failing, 2, 1));
    assertTrue(failure.getMessage(), failure.getMessage().contains("could only be written to 0"));
    assertNoPublicLocations(fs, failing);
    onFailedPrivateWrite(failing, failure);

    Path publicPath = new Path("/cocktail/public/" + name.getMethodName());
    Blocks.write(fs, publicPath, 2, 1);
  }

  private void assertNoPublicLocations(DistributedFileSystem fs, Path path) throws IOException {
    if (!fs.exists(path)) {
      return;
    }
    for (LocatedBlock block : fs.getClient().getLocatedBlocks(path.toString(), 0).getLocatedBlocks()) {
      for (DatanodeInfo location : block.getLocations()) {
        assertTrue(location.toString(), location.getNetworkLocation().startsWith("/private/"));
      }
    }
  }

  private List<Integer> privateIndexes() {
    List<Integer> indexes = new ArrayList<>();
    for (int i = 0; i < cluster().size(); i++) {
      if (cluster().isPrivate(i)) {
        indexes.add(i);
      }
    }
    return indexes;
  }

  private int indexOf(DatanodeInfo node) throws IOException {
    for (int index = 0; index < cluster().size(); index++) {
      DatanodeInfo report = cluster().report(index);
      if (report != null && report.getXferPort() == node.getXferPort()) {
        return index;
      }
    }
    throw new AssertionError("not a live datanode: " + node);
  }

  private int privateIndexHolding(Path path) throws IOException {
    String first = Blocks.locations(cluster().fs(), path)[0].getNames()[0];
    for (int index : privateIndexes()) {
      DatanodeInfo report = cluster().report(index);
      if (report != null && report.getXferAddr().equals(first)) {
        return index;
      }
    }
    throw new AssertionError("no private datanode holds " + first);
  }

  private void waitForReplicas(Path path, int replicas) throws Exception {
    GenericTestUtils.waitFor(() -> {
      try {
        for (BlockLocation block : Blocks.locations(cluster().fs(), path)) {
          if (block.getNames().length != replicas) {
            return false;
          }
        }
        return true;
      } catch (IOException e) {
        throw new IllegalStateException(e);
      }
    }, 200, WAIT_MS);
  }
}
