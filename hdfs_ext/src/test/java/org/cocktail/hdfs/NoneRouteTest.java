package org.cocktail.hdfs;

import static org.junit.Assert.assertFalse;

import java.io.IOException;

import org.apache.hadoop.fs.BlockLocation;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.junit.Test;

/** Without a route, private files do reach public datanodes: the assertions above can fail. */
public class NoneRouteTest {

  @Test(timeout = 120_000)
  public void withoutARoutePrivateFilesLandOnPublicDatanodes() throws IOException {
    try (CocktailMiniCluster cluster =
        PlacementContract.startCluster(Route.NONE, NoneRouteTest.class.getSimpleName())) {
      DistributedFileSystem fs = cluster.fs();
      Path path = new Path(cluster.privateRoot() + "/leaks");
      Blocks.write(fs, path, 3, 4);
      BlockLocation[] blocks = Blocks.locations(fs, path);
      assertFalse(Blocks.describe(blocks), Blocks.publicReplicas(blocks).isEmpty());
    }
  }
}
