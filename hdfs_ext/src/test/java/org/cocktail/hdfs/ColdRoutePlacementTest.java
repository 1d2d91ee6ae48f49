package org.cocktail.hdfs;

import java.io.IOException;

import org.junit.AfterClass;
import org.junit.BeforeClass;

public class ColdRoutePlacementTest extends PlacementContract {

  private static CocktailMiniCluster cluster;

  @BeforeClass
  public static void startCluster() throws IOException {
    cluster = startCluster(Route.COLD, ColdRoutePlacementTest.class.getSimpleName());
  }

  @AfterClass
  public static void stopCluster() {
    if (cluster != null) {
      cluster.close();
    }
  }

  @Override
  protected CocktailMiniCluster cluster() {
    return cluster;
  }
}
