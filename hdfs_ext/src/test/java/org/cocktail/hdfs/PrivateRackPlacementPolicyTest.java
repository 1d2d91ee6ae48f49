package org.cocktail.hdfs;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import org.apache.hadoop.conf.Configuration;
import org.junit.Test;

/** Path and rack classification, without a cluster. */
public class PrivateRackPlacementPolicyTest {

  private static PrivateRackPlacementPolicy policy(String root, String prefix) {
    Configuration conf = new Configuration(false);
    if (root != null) {
      conf.set(PrivateRackPlacementPolicy.PRIVATE_ROOT_KEY, root);
    }
    if (prefix != null) {
      conf.set(PrivateRackPlacementPolicy.PRIVATE_RACK_PREFIX_KEY, prefix);
    }
    PrivateRackPlacementPolicy policy = new PrivateRackPlacementPolicy();
    policy.setConf(conf);
    return policy;
  }

  @Test
  public void defaults() {
    PrivateRackPlacementPolicy policy = policy(null, null);
    assertEquals("/cocktail/private", policy.getPrivateRoot());
    assertEquals("/private/", policy.getPrivateRackPrefix());
  }

  @Test
  public void theRootAndEverythingUnderItIsPrivate() {
    PrivateRackPlacementPolicy policy = policy(null, null);
    assertTrue(policy.isPrivatePath("/cocktail/private"));
    assertTrue(policy.isPrivatePath("/cocktail/private/"));
    assertTrue(policy.isPrivatePath("/cocktail/private/a"));
    assertTrue(policy.isPrivatePath("/cocktail/private/a/b/c.bin"));
    assertTrue(policy.isPrivatePath("//cocktail///private//a"));
  }

  @Test
  public void siblingsWithTheSamePrefixAndParentsArePublic() {
    PrivateRackPlacementPolicy policy = policy(null, null);
    assertFalse(policy.isPrivatePath("/cocktail/privatefoo"));
    assertFalse(policy.isPrivatePath("/cocktail/privatefoo/a"));
    assertFalse(policy.isPrivatePath("/cocktail/private-x/a"));
    assertFalse(policy.isPrivatePath("/cocktail"));
    assertFalse(policy.isPrivatePath("/cocktail/public/a"));
    assertFalse(policy.isPrivatePath("/"));
    assertFalse(policy.isPrivatePath("/other/cocktail/private/a"));
  }

  @Test
  public void aConfiguredRootIsNormalised() {
    PrivateRackPlacementPolicy policy = policy(" /data//secret/ ", null);
    assertEquals("/data/secret", policy.getPrivateRoot());
    assertTrue(policy.isPrivatePath("/data/secret/x"));
    assertFalse(policy.isPrivatePath("/data/secrets/x"));
  }

  @Test
  public void aRelativeRootIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> policy("cocktail/private", null));
  }

  @Test
  public void theWholeNamespaceCanBePrivate() {
    PrivateRackPlacementPolicy policy = policy("/", null);
    assertTrue(policy.isPrivatePath("/"));
    assertTrue(policy.isPrivatePath("/anything"));
  }

  /** Inode-id and raw paths say nothing about where the file lives: confine them. */
  @Test
  public void reservedAndUnclassifiablePathsArePrivate() {
    PrivateRackPlacementPolicy policy = policy(null, null);
    assertTrue(policy.isPrivatePath("/.reserved/.inodes/16386"));
    assertTrue(policy.isPrivatePath("/.reserved/raw/cocktail/public/a"));
    assertTrue(policy.isPrivatePath("/.reserved"));
    assertTrue(policy.isPrivatePath("//.reserved//.inodes/1"));
    assertTrue(policy.isPrivatePath(null));
    assertTrue(policy.isPrivatePath(""));
    assertTrue(policy.isPrivatePath("cocktail/public/a"));
    assertTrue(policy.isPrivatePath("/cocktail/public/../private/a"));
    assertTrue(policy.isPrivatePath("/cocktail/./private/a"));
    assertFalse(policy.isPrivatePath("/.reservedfoo/a"));
  }

  @Test
  public void privateRacksAreThoseUnderThePrefix() {
    PrivateRackPlacementPolicy policy = policy(null, null);
    assertTrue(policy.isPrivateLocation("/private/r1"));
    assertTrue(policy.isPrivateLocation("/private/r1/ng1"));
    assertTrue(policy.isPrivateLocation("/private"));
    assertFalse(policy.isPrivateLocation("/privateer/r1"));
    assertFalse(policy.isPrivateLocation("/public/r1"));
    assertFalse(policy.isPrivateLocation("/default-rack"));
    assertFalse(policy.isPrivateLocation(null));
  }

  @Test
  public void aPrefixWithoutTrailingSlashStillMatchesWholeRackNames() {
    PrivateRackPlacementPolicy policy = policy(null, "/dc1/private");
    assertEquals("/dc1/private/", policy.getPrivateRackPrefix());
    assertTrue(policy.isPrivateLocation("/dc1/private/r7"));
    assertFalse(policy.isPrivateLocation("/dc1/privateer/r7"));
  }
}
