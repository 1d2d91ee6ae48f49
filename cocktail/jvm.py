"""The flags Cocktail gives the JVMs it starts or configures: Hadoop's, MapReduce's, Spark's."""

from __future__ import annotations

from pathlib import Path

# Hadoop 3.4 on Java 17 needs these in every JVM it starts, containers included (HADOOP-19310).
JAVA17_OPENS = tuple(f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
    "java.io", "java.lang", "java.lang.reflect", "java.math", "java.net", "java.text",
    "java.util", "java.util.concurrent", "java.util.zip", "sun.security.util",
    "sun.security.x509"))

# For a JVM that lives seconds to minutes and mostly moves bytes to and from Python (a
# MapReduce container under streaming, a publish's Spark driver and executors): C2's compiles
# cost more CPU than they return, and one GC thread is enough.  Measured: half the CPU of a
# MapReduce application master, a third less for the Spark tests, a 1M-record Spark publish
# 8% faster (docs/engines.md).  Long-lived daemons keep C2 (hadoop.jvm_options).
SHORT_LIVED = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def spark_java_options() -> dict[str, str]:
    """The Spark settings that give its driver, executors and YARN application master
    SHORT_LIVED; a user's own value of one of them replaces it."""
    flags = " ".join(SHORT_LIVED)
    return {f"spark.{role}.extraJavaOptions": flags
            for role in ("driver", "executor", "yarn.am")}


# A local Spark driver's logging (spark-log4j2.properties beside this module): a driver on this
# machine only, as the file is not on a cluster's.
SPARK_LOG_CONFIG = Path(__file__).with_name("spark-log4j2.properties")


def spark_driver_logging() -> str:
    return f"-Dlog4j2.configurationFile={SPARK_LOG_CONFIG.as_uri()}"
