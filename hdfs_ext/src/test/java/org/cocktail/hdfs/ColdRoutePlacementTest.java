package org.cocktail.hdfs;

public class ColdRoutePlacementTest extends PlacementContract {

  @Override
  protected Route route() {
    return Route.COLD;
  }
}
