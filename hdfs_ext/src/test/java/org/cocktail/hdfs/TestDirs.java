package org.cocktail.hdfs;

import java.io.File;

import org.apache.hadoop.fs.FileUtil;

/** Fresh per-class directories under target/test/data (surefire sets test.build.data). */
final class TestDirs {

  private TestDirs() {
  }

  static File forClass(String name) {
    File dir = new File(System.getProperty("test.build.data", "target/test/data"), name);
    FileUtil.fullyDelete(dir);
    return dir.getAbsoluteFile();
  }
}
