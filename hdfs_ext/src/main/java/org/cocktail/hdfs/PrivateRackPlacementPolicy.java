package org.cocktail.hdfs;

import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.hadoop.conf.Configurable;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.AddBlockFlag;
import org.apache.hadoop.hdfs.protocol.BlockStoragePolicy;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.server.blockmanagement.BlockPlacementPolicyDefault;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeDescriptor;
import org.apache.hadoop.hdfs.server.blockmanagement.DatanodeStorageInfo;
import org.apache.hadoop.net.Node;
import org.apache.hadoop.net.NodeBase;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Default HDFS placement, except that every replica of a file at or under the private root goes to
 * a datanode whose rack starts with the private rack prefix. Fails closed: when no private
 * datanode can take a replica, fewer targets are returned and HDFS refuses the write; a public
 * datanode is never used instead.
 *
 * <p>Load it with {@code dfs.block.replicator.classname}; configure {@value #PRIVATE_ROOT_KEY}
 * and {@value #PRIVATE_RACK_PREFIX_KEY}.
 */
public class PrivateRackPlacementPolicy extends BlockPlacementPolicyDefault
    implements Configurable {

  public static final String PRIVATE_ROOT_KEY = "cocktail.private.root";
  public static final String PRIVATE_ROOT_DEFAULT = "/cocktail/private";
  public static final String PRIVATE_RACK_PREFIX_KEY = "cocktail.private.rack.prefix";
  public static final String PRIVATE_RACK_PREFIX_DEFAULT = "/private/";

  private static final Logger LOG = LoggerFactory.getLogger(PrivateRackPlacementPolicy.class);
  private static final String RESERVED_ROOT = "/.reserved";

  private Configuration conf;
  private volatile String privateRoot = PRIVATE_ROOT_DEFAULT;
  private volatile String rackPrefix = PRIVATE_RACK_PREFIX_DEFAULT;

  public PrivateRackPlacementPolicy() {
  }

  @Override
  public void setConf(Configuration conf) {
    this.conf = conf;
    privateRoot = normalizeRoot(conf.getTrimmed(PRIVATE_ROOT_KEY, PRIVATE_ROOT_DEFAULT));
    rackPrefix = withTrailingSlash(
        conf.getTrimmed(PRIVATE_RACK_PREFIX_KEY, PRIVATE_RACK_PREFIX_DEFAULT));
    LOG.info("Replicas of files under {} are kept on datanodes in racks {}*", privateRoot,
        rackPrefix);
  }

  @Override
  public Configuration getConf() {
    return conf;
  }

  public String getPrivateRoot() {
    return privateRoot;
  }

  public String getPrivateRackPrefix() {
    return rackPrefix;
  }

  /**
   * Whether the replicas of {@code srcPath} must stay on private racks. Paths that cannot be
   * classified (null, relative, "." or ".." components, anything under /.reserved such as
   * /.reserved/.inodes/ID or /.reserved/raw/...) count as private: a wrong "public" answer would
   * leak, a wrong "private" one only narrows the choice of datanodes.
   */
  public boolean isPrivatePath(String srcPath) {
    if (srcPath == null || !srcPath.startsWith("/")) {
      return true;
    }
    String path = collapseSlashes(srcPath);
    if (hasDotComponent(path) || isAtOrUnder(path, RESERVED_ROOT)) {
      return true;
    }
    return isAtOrUnder(path, privateRoot);
  }

  /** Whether a network location (rack) is a private one, e.g. "/private/r1". */
  public boolean isPrivateLocation(String networkLocation) {
    return networkLocation != null && withTrailingSlash(networkLocation).startsWith(rackPrefix);
  }

  @Override
  public DatanodeStorageInfo[] chooseTarget(String srcPath, int numOfReplicas, Node writer,
      List<DatanodeStorageInfo> chosen, boolean returnChosenNodes, Set<Node> excludedNodes,
      long blocksize, BlockStoragePolicy storagePolicy, EnumSet<AddBlockFlag> flags) {
    if (!isPrivatePath(srcPath)) {
      return super.chooseTarget(srcPath, numOfReplicas, writer, chosen, returnChosenNodes,
          excludedNodes, blocksize, storagePolicy, flags);
    }
    DatanodeStorageInfo[] targets = super.chooseTarget(srcPath, numOfReplicas, writer, chosen,
        returnChosenNodes, withPublicNodesExcluded(excludedNodes), blocksize, storagePolicy, flags);
    return checked(srcPath, numOfReplicas, chosen, returnChosenNodes, targets);
  }

  @Override
  public DatanodeStorageInfo[] chooseTarget(String srcPath, int numOfReplicas, Node writer,
      List<DatanodeStorageInfo> chosen, boolean returnChosenNodes, Set<Node> excludedNodes,
      long blocksize, BlockStoragePolicy storagePolicy, EnumSet<AddBlockFlag> flags,
      EnumMap<StorageType, Integer> storageTypes) {
    if (!isPrivatePath(srcPath)) {
      return super.chooseTarget(srcPath, numOfReplicas, writer, chosen, returnChosenNodes,
          excludedNodes, blocksize, storagePolicy, flags, storageTypes);
    }
    DatanodeStorageInfo[] targets = super.chooseTarget(srcPath, numOfReplicas, writer, chosen,
        returnChosenNodes, withPublicNodesExcluded(excludedNodes), blocksize, storagePolicy, flags,
        storageTypes);
    return checked(srcPath, numOfReplicas, chosen, returnChosenNodes, targets);
  }

  /** Favored nodes come from the client: drop the public ones for private files. */
  @Override
  protected void chooseFavouredNodes(String src, int numOfReplicas,
      List<DatanodeDescriptor> favoredNodes, Set<Node> favoriteAndExcludedNodes, long blocksize,
      int maxNodesPerRack, List<DatanodeStorageInfo> results, boolean avoidStaleNodes,
      EnumMap<StorageType, Integer> storageTypes) throws NotEnoughReplicasException {
    List<DatanodeDescriptor> allowed = favoredNodes;
    if (isPrivatePath(src)) {
      allowed = new ArrayList<>(favoredNodes.size());
      for (DatanodeDescriptor node : favoredNodes) {
        if (isPrivateLocation(node.getNetworkLocation())) {
          allowed.add(node);
        }
      }
    }
    super.chooseFavouredNodes(src, numOfReplicas, allowed, favoriteAndExcludedNodes, blocksize,
        maxNodesPerRack, results, avoidStaleNodes, storageTypes);
  }

  /** Balancer: never move a replica off a private rack onto a non-private one. */
  @Override
  public boolean isMovable(Collection<DatanodeInfo> candidates, DatanodeInfo source,
      DatanodeInfo target) {
    if (isPrivateLocation(source.getNetworkLocation())
        && !isPrivateLocation(target.getNetworkLocation())) {
      return false;
    }
    return super.isMovable(candidates, source, target);
  }

  private Set<Node> withPublicNodesExcluded(Set<Node> excludedNodes) {
    Set<Node> excluded = excludedNodes == null ? new HashSet<>() : new HashSet<>(excludedNodes);
    for (Node node : clusterMap.getLeaves(NodeBase.ROOT)) {
      if (!isPrivateLocation(node.getNetworkLocation())) {
        excluded.add(node);
      }
    }
    return excluded;
  }

  /** Says loudly when the private racks could not take every replica (HDFS then fails closed). */
  private DatanodeStorageInfo[] checked(String srcPath, int wanted,
      List<DatanodeStorageInfo> chosen, boolean returnChosenNodes, DatanodeStorageInfo[] targets) {
    int placed = targets.length - (returnChosenNodes && chosen != null ? chosen.size() : 0);
    if (placed <= 0 && wanted > 0) {
      LOG.warn("No private datanode (rack {}*) could take the replica of {}: 0 of {} new replicas "
          + "placed; public datanodes are never used for the private root", rackPrefix, srcPath,
          wanted);
    } else if (placed < wanted) {
      LOG.warn("Only {} of {} new replicas of {} placed on private datanodes (rack {}*); public "
          + "datanodes are never used for the private root", placed, wanted, srcPath, rackPrefix);
    }
    return targets;
  }

  private boolean isAtOrUnder(String path, String root) {
    return root.equals("/") || path.equals(root) || path.startsWith(root + "/");
  }

  private static boolean hasDotComponent(String path) {
    for (String component : path.split("/")) {
      if (component.equals(".") || component.equals("..")) {
        return true;
      }
    }
    return false;
  }

  /** "//a///b/" becomes "/a/b"; "/" stays "/". */
  private static String collapseSlashes(String path) {
    String collapsed = path.replaceAll("/+", "/");
    return collapsed.length() > 1 && collapsed.endsWith("/")
        ? collapsed.substring(0, collapsed.length() - 1) : collapsed;
  }

  private static String normalizeRoot(String root) {
    if (!root.startsWith("/")) {
      throw new IllegalArgumentException(PRIVATE_ROOT_KEY + " must be absolute: " + root);
    }
    return collapseSlashes(root);
  }

  private static String withTrailingSlash(String location) {
    return location.endsWith("/") ? location : location + "/";
  }
}
