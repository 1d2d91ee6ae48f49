package org.cocktail.hdfs;

import java.io.IOException;
import java.util.Locale;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DFSConfigKeys;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.server.blockmanagement.BlockPlacementPolicy;

/** How the private root is kept on private datanodes. */
public enum Route {
  /** The placement policy of this module. */
  SHIM,
  /** No custom code: COLD storage policy on the private root, ARCHIVE only on private nodes. */
  COLD,
  /** Neither: stock HDFS, so that an audit has something to catch. */
  NONE;

  public static Route parse(String name) {
    return valueOf(name.toUpperCase(Locale.ROOT));
  }

  public String label() {
    return name().toLowerCase(Locale.ROOT);
  }

  /** Namenode settings, before the cluster starts. */
  void configure(Configuration conf) {
    if (this == SHIM) {
      conf.setClass(DFSConfigKeys.DFS_BLOCK_REPLICATOR_CLASSNAME_KEY,
          PrivateRackPlacementPolicy.class, BlockPlacementPolicy.class);
    }
  }

  /** Namespace settings, once the cluster is up. */
  void prepare(DistributedFileSystem fs, String privateRoot) throws IOException {
    Path root = new Path(privateRoot);
    fs.mkdirs(root);
    if (this == COLD) {
      fs.setStoragePolicy(root, "COLD");
    }
  }
}
