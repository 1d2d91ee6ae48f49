package org.cocktail.hdfs;

import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.hdfs.server.blockmanagement.BlockPlacementPolicy;
import org.junit.Test;

public class ShimRoutePlacementTest extends PlacementContract {

  @Override
  protected Route route() {
    return Route.SHIM;
  }

  private PrivateRackPlacementPolicy namenodePolicy() {
    BlockPlacementPolicy policy =
        cluster().dfs().getNamesystem().getBlockManager().getBlockPlacementPolicy();
    assertTrue(policy.getClass().getName(), policy instanceof PrivateRackPlacementPolicy);
    return (PrivateRackPlacementPolicy) policy;
  }

  @Test
  public void theBalancerMayNotMoveAReplicaFromAPrivateToAPublicDatanode() throws IOException {
    PrivateRackPlacementPolicy policy = namenodePolicy();
    DatanodeInfo private0 = cluster().report(0);
    DatanodeInfo private1 = cluster().report(1);
    DatanodeInfo private2 = cluster().report(2);
    DatanodeInfo public0 = cluster().report(3);
    DatanodeInfo public1 = cluster().report(4);
    DatanodeInfo public2 = cluster().report(5);

    assertFalse(policy.isMovable(List.of(private0, private1), private0, public0));
    assertTrue(policy.isMovable(List.of(private0, private1), private0, private2));
    assertTrue(policy.isMovable(List.of(public0, public1), public0, public2));
  }

  /** The datanode that proxies a WebHDFS upload sees the bytes: it must be private too. */
  @Test
  public void aWebHdfsCreateOfAPrivateFileIsRedirectedToAPrivateDatanode() throws IOException {
    List<String> privateHosts = new ArrayList<>();
    for (int i = 0; i < cluster().size(); i++) {
      if (cluster().isPrivate(i)) {
        privateHosts.add(cluster().report(i).getHostName());
      }
    }
    for (int attempt = 0; attempt < 10; attempt++) {
      String host = URI.create(createLocation(privatePath("proxied"))).getHost();
      assertTrue(host + " is not a private datanode " + privateHosts,
          privateHosts.contains(host));
    }
  }

  private String createLocation(org.apache.hadoop.fs.Path path) throws IOException {
    URL url = new URL(cluster().dfs().getHttpUri(0) + "/webhdfs/v1" + path
        + "?op=CREATE&noredirect=true&user.name=" + System.getProperty("user.name"));
    HttpURLConnection connection = (HttpURLConnection) url.openConnection();
    connection.setRequestMethod("PUT");
    try (InputStream in = connection.getInputStream()) {
      Map<?, ?> answer = new ObjectMapper().readValue(
          new String(in.readAllBytes(), StandardCharsets.UTF_8), Map.class);
      return (String) answer.get("Location");
    } finally {
      connection.disconnect();
    }
  }
}
