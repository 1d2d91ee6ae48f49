package org.cocktail.hdfs;

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.logging.FileHandler;
import java.util.logging.SimpleFormatter;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.StorageType;
import org.apache.hadoop.hdfs.protocol.DatanodeInfo;
import org.apache.hadoop.net.NetUtils;
import org.apache.log4j.LogManager;
import org.apache.log4j.PropertyConfigurator;

/**
 * The in-process Hadoop cluster for the Python tests: HDFS with private and public datanodes
 * (and, with --yarn, YARN/MapReduce with a "private" node label). It writes a conf dir and a JSON
 * description, prints "ready", then answers one JSON line per stdin command until stdin closes.
 */
public final class Launcher {

  static final String USAGE = String.join("\n",
      "Usage: Launcher --json PATH [--base-dir DIR] [--route shim|cold|none] [--yarn]",
      "                [--private-root /cocktail/private] [--replication 2]",
      "                [--yarn-max-disk-percent 99]",
      "Commands on stdin (one JSON answer each): stop-datanode I, restart-datanode I,",
      "shutdown-namenode, restart-namenode, wait-active. EOF on stdin shuts down.");

  private static final int PRIVATE_DATANODES = 2;
  private static final int PUBLIC_DATANODES = 3;
  private static final ObjectMapper JSON = new ObjectMapper();

  /** Parsed command line. */
  static final class Args {
    Path json;
    Path baseDir;
    Route route = Route.SHIM;
    boolean yarn;
    String privateRoot = CocktailMiniCluster.DEFAULT_PRIVATE_ROOT;
    int replication = 2;
    /**
     * A NodeManager is UNHEALTHY past this use of its disk (Hadoop's default is 90): a test
     * cluster writes megabytes, and should not stop on a developer's disk 91% full.
     */
    float yarnMaxDiskPercent = 99.0f;

    static Args parse(String[] argv) throws IOException {
      Args args = new Args();
      for (int i = 0; i < argv.length; i++) {
        switch (argv[i]) {
          case "--json" -> args.json = Path.of(value(argv, ++i, "--json")).toAbsolutePath();
          case "--base-dir" -> args.baseDir = Path.of(value(argv, ++i, "--base-dir"));
          case "--route" -> args.route = route(value(argv, ++i, "--route"));
          case "--yarn" -> args.yarn = true;
          case "--private-root" -> args.privateRoot = value(argv, ++i, "--private-root");
          case "--replication" -> args.replication = replication(value(argv, ++i, "--replication"));
          case "--yarn-max-disk-percent" ->
              args.yarnMaxDiskPercent = percent(value(argv, ++i, "--yarn-max-disk-percent"));
          default -> throw new IllegalArgumentException("unknown option " + argv[i]);
        }
      }
      if (args.json == null) {
        throw new IllegalArgumentException("--json PATH is required");
      }
      args.baseDir = (args.baseDir != null ? args.baseDir
          : Files.createTempDirectory("cocktail-hadoop")).toAbsolutePath();
      return args;
    }

    private static String value(String[] argv, int i, String option) {
      if (i >= argv.length) {
        throw new IllegalArgumentException(option + " needs a value");
      }
      return argv[i];
    }

    private static Route route(String name) {
      try {
        return Route.parse(name);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--route must be shim, cold or none, not " + name);
      }
    }

    private static int replication(String text) {
      try {
        int value = Integer.parseInt(text);
        if (value >= 1) {
          return value;
        }
      } catch (NumberFormatException e) {
        // reported below
      }
      throw new IllegalArgumentException("--replication must be a positive integer, not " + text);
    }

    private static float percent(String text) {
      try {
        float value = Float.parseFloat(text);
        if (value >= 0 && value <= 100) {
          return value;
        }
      } catch (NumberFormatException e) {
        // reported below
      }
      throw new IllegalArgumentException(
          "--yarn-max-disk-percent must be a number from 0 to 100, not " + text);
    }
  }

  private final Args args;
  private final PrintStream channel;
  private CocktailMiniCluster hdfs;
  private YarnCluster yarn;

  private Launcher(Args args, PrintStream channel) {
    this.args = args;
    this.channel = channel;
  }

  public static void main(String[] argv) throws IOException {
    // stdout is the command channel: anything else that prints there goes to stderr.
    PrintStream channel = new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), true,
        StandardCharsets.UTF_8);
    System.setOut(System.err);
    Args args;
    try {
      args = Args.parse(argv);
    } catch (IllegalArgumentException e) {
      System.err.println("launcher: " + e.getMessage());
      System.err.println(USAGE);
      System.exit(2);
      return;
    }
    try {
      Files.createDirectories(args.baseDir);
      logTo(args.baseDir);
    } catch (IOException e) {
      System.err.println("launcher: cannot use --base-dir " + args.baseDir + ": " + e);
      System.exit(1);
      return;
    }
    // MiniYARNCluster's work dirs, otherwise relative to the working directory.
    System.setProperty("test.build.data", args.baseDir.resolve("yarn").toString());
    Launcher launcher = new Launcher(args, channel);
    try {
      launcher.start();
    } catch (Exception | Error e) {
      e.printStackTrace(System.err);
      System.err.println("launcher: could not start the cluster: " + e);  // last: the reason
      launcher.stop();
      System.exit(1);
      return;
    }
    channel.println("ready");
    launcher.serve(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
    launcher.stop();
    System.exit(0);
  }

  /**
   * Hadoop's log4j output goes to launcher.log (replacing the test classpath's
   * log4j.properties), Jersey's java.util.logging output to launcher-jul.log.
   */
  private static void logTo(Path dir) throws IOException {
    Properties log4j = new Properties();
    log4j.setProperty("log4j.rootLogger", "INFO,file");
    log4j.setProperty("log4j.appender.file", "org.apache.log4j.FileAppender");
    log4j.setProperty("log4j.appender.file.File", dir.resolve("launcher.log").toString());
    log4j.setProperty("log4j.appender.file.layout", "org.apache.log4j.PatternLayout");
    log4j.setProperty("log4j.appender.file.layout.ConversionPattern",
        "%d{ISO8601} %-5p [%t] %c{2}: %m%n");
    LogManager.resetConfiguration();
    PropertyConfigurator.configure(log4j);
    java.util.logging.LogManager.getLogManager().reset();
    FileHandler jul = new FileHandler(dir.resolve("launcher-jul.log").toString());
    jul.setFormatter(new SimpleFormatter());
    java.util.logging.Logger.getLogger("").addHandler(jul);
  }

  private void start() throws Exception {
    long started = System.nanoTime();
    hdfs = CocktailMiniCluster.start(new CocktailMiniCluster.Options()
        .route(args.route)
        .privateDatanodes(PRIVATE_DATANODES)
        .publicDatanodes(PUBLIC_DATANODES)
        .replication(args.replication)
        .privateRoot(args.privateRoot)
        .baseDir(args.baseDir.toFile()));
    if (args.yarn) {
      yarn = YarnCluster.start(hdfs.conf(), args.baseDir.toFile(), args.yarnMaxDiskPercent);
    }
    Path confDir = writeConfDir();
    writeAtomically(args.json, JSON.writerWithDefaultPrettyPrinter()
        .writeValueAsBytes(description(confDir)));
    System.err.printf("launcher: up in %.1f s (route %s%s)%n", (System.nanoTime() - started) / 1e9,
        args.route.label(), args.yarn ? ", with YARN" : "");
  }

  /** core-, hdfs-, yarn- and mapred-site.xml: the live configuration, for other JVMs. */
  private Path writeConfDir() throws IOException {
    Configuration live = new Configuration(yarn != null ? yarn.conf() : hdfs.conf());
    live.set("fs.defaultFS", hdfs.dfs().getURI().toString());
    live.set("mapreduce.framework.name", yarn != null ? "yarn" : "local");
    Path dir = args.baseDir.resolve("conf");
    Files.createDirectories(dir);
    for (String site : new String[] {"core", "hdfs", "yarn", "mapred"}) {
      Path file = dir.resolve(site + "-site.xml");
      try (OutputStream out = Files.newOutputStream(file)) {
        live.writeXml(out);
      }
    }
    return dir;
  }

  private Map<String, Object> description(Path confDir) throws IOException {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("namenode", "hdfs://127.0.0.1:" + hdfs.dfs().getNameNodePort());
    out.put("webhdfs", "http://127.0.0.1:" + hdfs.dfs().getNameNode().getHttpAddress().getPort());
    out.put("route", args.route.label());
    out.put("private_root", hdfs.privateRoot());
    out.put("replication", hdfs.replication());
    out.put("datanodes", datanodes());
    out.put("resourcemanager", yarn == null ? null
        : "127.0.0.1:" + NetUtils.createSocketAddr(yarn.resourceManagerAddress()).getPort());
    out.put("node_labels", yarn == null ? Map.of()
        : Map.of(YarnCluster.PRIVATE_LABEL, List.of(yarn.privateNode().toString())));
    out.put("conf_dir", confDir.toString());
    out.put("base_dir", args.baseDir.toString());
    out.put("pid", ProcessHandle.current().pid());
    return out;
  }

  private List<Map<String, Object>> datanodes() throws IOException {
    List<Map<String, Object>> out = new ArrayList<>();
    for (int i = 0; i < hdfs.size(); i++) {
      out.add(datanode(i));
    }
    return out;
  }

  private Map<String, Object> datanode(int index) throws IOException {
    DatanodeInfo report = hdfs.report(index);
    if (report == null) {
      throw new IOException("datanode " + index + " is not live");
    }
    List<String> types = new ArrayList<>();
    for (StorageType type : hdfs.storageTypes(index)) {
      types.add(type.name());
    }
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("index", index);
    out.put("hostname", report.getHostName());
    out.put("ip", report.getIpAddr());
    out.put("xfer_port", report.getXferPort());
    out.put("info_port", report.getInfoPort());
    out.put("rack", report.getNetworkLocation());
    out.put("private", hdfs.isPrivate(index));
    out.put("storage_types", types);
    return out;
  }

  private static void writeAtomically(Path target, byte[] content) throws IOException {
    Path tmp = target.resolveSibling(target.getFileName() + ".tmp");
    Files.write(tmp, content);
    Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  private void serve(BufferedReader in) throws IOException {
    String line;
    while ((line = in.readLine()) != null) {
      if (!line.isBlank()) {
        channel.println(JSON.writeValueAsString(answer(line.trim())));
      }
    }
  }

  private Map<String, Object> answer(String line) {
    String[] words = line.split("\\s+");
    Map<String, Object> out = new LinkedHashMap<>();
    try {
      switch (words[0]) {
        case "stop-datanode" -> {
          int index = datanodeIndex(words);
          hdfs.stopDatanode(index, true);
          out.put("index", index);
        }
        case "restart-datanode" -> {
          int index = datanodeIndex(words);
          hdfs.restartDatanode(index);
          out.put("datanode", datanode(index));
        }
        case "shutdown-namenode" -> hdfs.dfs().shutdownNameNode(0);
        case "restart-namenode" -> hdfs.dfs().restartNameNode(0);
        case "wait-active" -> hdfs.dfs().waitActive();
        default -> throw new IllegalArgumentException("unknown command: " + words[0]);
      }
      Map<String, Object> ok = new LinkedHashMap<>();
      ok.put("ok", true);
      ok.putAll(out);
      return ok;
    } catch (Exception e) {
      Map<String, Object> failed = new LinkedHashMap<>();
      failed.put("ok", false);
      failed.put("error", String.valueOf(e.getMessage() != null ? e.getMessage() : e));
      return failed;
    }
  }

  private int datanodeIndex(String[] words) {
    if (words.length != 2) {
      throw new IllegalArgumentException(words[0] + " needs one datanode index");
    }
    int index;
    try {
      index = Integer.parseInt(words[1]);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("not a datanode index: " + words[1]);
    }
    if (index < 0 || index >= hdfs.size()) {
      throw new IllegalArgumentException("no datanode " + index + " (0.." + (hdfs.size() - 1) + ")");
    }
    return index;
  }

  private void stop() {
    if (yarn != null) {
      yarn.close();
    }
    if (hdfs != null) {
      hdfs.close();
    }
  }
}
