package org.cocktail.hdfs;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StorageType;

/** Writing multi-block files and asserting where their replicas are. */
final class Blocks {

  static final long BLOCK_SIZE = CocktailMiniCluster.MIN_BLOCK_SIZE;
  private static final Random RANDOM = new Random();

  private Blocks() {
  }

  /** Writes {@code blocks} full blocks of random bytes; the stream is closed on return. */
  static void write(FileSystem fs, Path path, int replication, int blocks) throws IOException {
    try (FSDataOutputStream out =
        fs.create(path, true, 4096, (short) replication, BLOCK_SIZE)) {
      fill(out, blocks);
    }
  }

  static void fill(FSDataOutputStream out, int blocks) throws IOException {
    byte[] data = new byte[(int) BLOCK_SIZE];
    for (int i = 0; i < blocks; i++) {
      RANDOM.nextBytes(data);
      out.write(data);
    }
  }

  static BlockLocation[] locations(FileSystem fs, Path path) throws IOException {
    return fs.getFileBlockLocations(path, 0, fs.getFileStatus(path).getLen());
  }

  /** Every replica of every block is in a /private/ rack, and each block has {@code replicas}. */
  static void assertAllPrivate(BlockLocation[] blocks, int replicas) throws IOException {
    assertTrue("no blocks", blocks.length > 0);
    for (BlockLocation block : blocks) {
      String[] paths = block.getTopologyPaths();
      assertEquals("replicas of " + block, replicas, paths.length);
      for (String path : paths) {
        assertTrue("replica on a non-private datanode: " + path, path.startsWith("/private/"));
      }
    }
  }

  static void assertStorage(BlockLocation[] blocks, StorageType expected) throws IOException {
    for (BlockLocation block : blocks) {
      for (StorageType type : block.getStorageTypes()) {
        assertEquals("storage of " + block, expected, type);
      }
    }
  }

  static List<String> publicReplicas(BlockLocation[] blocks) throws IOException {
    List<String> found = new ArrayList<>();
    for (BlockLocation block : blocks) {
      for (String path : block.getTopologyPaths()) {
        if (path.startsWith("/public/")) {
          found.add(path);
        }
      }
    }
    return found;
  }

  static String describe(BlockLocation[] blocks) throws IOException {
    List<String> out = new ArrayList<>();
    for (BlockLocation block : blocks) {
      out.add(Arrays.toString(block.getTopologyPaths()));
    }
    return out.toString();
  }
}
