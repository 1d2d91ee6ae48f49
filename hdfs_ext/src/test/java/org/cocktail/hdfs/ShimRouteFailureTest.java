package org.cocktail.hdfs;

import static org.junit.Assert.assertTrue;

import java.io.IOException;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.test.GenericTestUtils.LogCapturer;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.slf4j.LoggerFactory;

public class ShimRouteFailureTest extends FailureContract {

  private static LogCapturer policyLog;

  @BeforeClass
  public static void capturePolicyLog() {
    policyLog = LogCapturer.captureLogs(LoggerFactory.getLogger(PrivateRackPlacementPolicy.class));
  }

  @AfterClass
  public static void stopCapturing() {
    policyLog.stopCapturing();
  }

  @Override
  protected Route route() {
    return Route.SHIM;
  }

  @Override
  protected void onFailedPrivateWrite(Path path, IOException failure) {
    String expected = "No private datanode (rack /private/*) could take the replica of " + path;
    assertTrue(policyLog.getOutput(), policyLog.getOutput().contains(expected));
  }
}
