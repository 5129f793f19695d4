//! The JVM servers (Apache Kafka, Apache Cassandra) as the jars Maven
//! Central publishes: where `scripts/setup` put them, and the `java` that
//! runs them.
//!
//! Each distribution is a `libs/` directory of jars (the server and its
//! runtime dependencies, copied by `mvn dependency:copy-dependencies` from
//! the POM under `devstack/jvm/NAME/`), in
//! `~/.local/share/seckill/NAME-VERSION`, or where an environment variable
//! points.

use std::path::PathBuf;
use std::process::Command;

use crate::process::find_binary;
use crate::DevstackError;

/// One server distribution fetched from Maven Central.
#[derive(Clone, Copy, Debug)]
pub struct Distribution {
    /// Its directory name's stem, and what messages call it.
    pub name: &'static str,
    /// The version the POM pins.
    pub version: &'static str,
    /// The environment variable that points at another install.
    pub home_var: &'static str,
    /// A jar whose presence proves the copy finished (`scripts/setup`
    /// copies into a temporary directory and moves it into place last).
    pub marker_jar: &'static str,
}

impl Distribution {
    /// Apache Kafka, as `devstack/jvm/kafka/pom.xml` pins it.
    pub const KAFKA: Self =
        Self { name: "kafka", version: "4.1.1", home_var: "SECKILL_KAFKA_HOME", marker_jar: "kafka_2.13-4.1.1.jar" };

    /// Apache Cassandra, as `devstack/jvm/cassandra/pom.xml` pins it.
    pub const CASSANDRA: Self = Self {
        name: "cassandra",
        version: "5.0.8",
        home_var: "SECKILL_CASSANDRA_HOME",
        marker_jar: "cassandra-all-5.0.8.jar",
    };

    /// The install's home: `$home_var`, else
    /// `~/.local/share/seckill/NAME-VERSION`.
    pub fn home(&self) -> PathBuf {
        std::env::var_os(self.home_var).filter(|home| !home.is_empty()).map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".local/share/seckill")
                .join(format!("{}-{}", self.name, self.version))
        })
    }

    /// The directory of jars, checked to hold the server's own jar.
    pub fn libs(&self) -> Result<PathBuf, DevstackError> {
        let libs = self.home().join("libs");
        if libs.join(self.marker_jar).is_file() {
            Ok(libs)
        } else {
            Err(DevstackError::NotInstalled(format!("{} {} (no {})", self.name, self.version, libs.display())))
        }
    }

    /// The classpath `java -cp` takes: every jar of [`libs`](Self::libs).
    pub fn classpath(&self) -> Result<String, DevstackError> {
        Ok(format!("{}/*", self.libs()?.display()))
    }
}

/// The `java` to run the servers with: `$JAVA_HOME/bin/java`, else the one
/// on PATH. Cassandra 5.0 needs Java 17 (Debian 12's default).
pub fn java() -> Result<PathBuf, DevstackError> {
    std::env::var_os("JAVA_HOME")
        .map(|home| PathBuf::from(home).join("bin/java"))
        .filter(|java| java.is_file())
        .or_else(|| find_binary("java"))
        .ok_or_else(|| DevstackError::NotInstalled("java (Java 17: apt-get install openjdk-17-jre-headless)".into()))
}

/// A `java` command with the classpath of `distribution` and a fixed heap.
pub(crate) fn command(distribution: &Distribution, heap_mb: u32) -> Result<Command, DevstackError> {
    let mut command = Command::new(java()?);
    command
        .arg(format!("-Xms{heap_mb}m"))
        .arg(format!("-Xmx{heap_mb}m"))
        .arg("-Djava.net.preferIPv4Stack=true")
        .arg("-Djava.awt.headless=true")
        .args(["-cp", &distribution.classpath()?]);
    Ok(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_install_names_what_to_run() {
        let missing = Distribution { home_var: "SECKILL_TEST_NO_SUCH_HOME", ..Distribution::KAFKA };
        // The default home of a user without the jars.
        let error = Distribution { marker_jar: "no-such.jar", ..missing }.libs().expect_err("not installed");
        assert!(error.to_string().contains("run scripts/setup"), "{error}");
    }
}
