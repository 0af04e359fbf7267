//! A fresh PostgreSQL database for every test (feature `testing`).
//!
//! ```no_run
//! # async fn t() {
//! let (url, _db) = graphloom_postgres::testing::test_database().await;
//! let saver = graphloom_postgres::PostgresSaver::connect(&url).await.unwrap();
//! # }
//! ```
//!
//! [`test_database`] creates a database named `gl_<uuid>` and returns its URL with a guard
//! that drops it (`DROP DATABASE ... WITH (FORCE)`) when the test ends, so tests never see
//! each other's data and can run in parallel (nextest runs each test in its own process).
//! The server is found this way:
//!
//! 1. If `GRAPHLOOM_PG_URL` is set (e.g. `postgres://postgres@127.0.0.1:5432/postgres`,
//!    as `scripts/test.sh` exports for its one cluster per test run), the database is
//!    created on that server, with that URL's user, who must be allowed to create databases.
//! 2. Otherwise a private server is started from the installed binaries, once per process:
//!    `initdb` into a temp dir (as user `postgres` through `runuser` when running as root,
//!    since postgres refuses to run as root), trust authentication, a free port on
//!    127.0.0.1, its unix socket inside the temp dir, `fsync=off` (a throwaway cluster).
//!    The binaries are looked up in `GRAPHLOOM_PG_BIN`, then the newest
//!    `/usr/lib/postgresql/*/bin` (Debian), then `pg_config --bindir`. A watchdog process
//!    stops the server and removes the temp dir once the test process has exited.
//!
//! If neither works, [`test_database`] **panics with a message saying what to do**: tests
//! that need PostgreSQL fail rather than skip themselves, so CI cannot pass without running
//! them.
//!
//! Starting the private server blocks the calling thread for a second or two (once per
//! process).

use sqlx::{Connection, PgConnection};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Environment variable naming an existing server to create test databases on.
pub const URL_ENV: &str = "GRAPHLOOM_PG_URL";
/// Environment variable naming the directory of the PostgreSQL server binaries.
pub const BIN_ENV: &str = "GRAPHLOOM_PG_BIN";

/// Why no test database could be had.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct HarnessError(String);

/// A test database; dropping it drops the database (and ends its connections).
pub struct TestDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl fmt::Debug for TestDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestDatabase").field("url", &self.url).finish()
    }
}

impl TestDatabase {
    /// URL of the database.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
    /// Its name (`gl_<uuid>`).
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }
    /// URL of the server's maintenance database (to create more databases, or to act on
    /// this one from outside).
    #[must_use]
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin = self.admin_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        // Drop runs inside the test's runtime, which cannot be blocked on; use a thread with
        // its own. Failing to drop leaves a database behind, which is harmless.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async {
                if let Ok(mut conn) = PgConnection::connect(&admin).await {
                    let _ = sqlx::query(&sql).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// A fresh database: its URL and the guard that drops it.
///
/// # Panics
/// If no server can be reached or started, with a message saying how to provide one.
pub async fn test_database() -> (String, TestDatabase) {
    match try_test_database().await {
        Ok(found) => found,
        Err(e) => panic!(
            "graphloom-postgres tests need a PostgreSQL server: {e}\n\
             Either export {URL_ENV}=postgres://USER@HOST:PORT/postgres (a user allowed to create \
             databases), or install the server binaries (`apt-get install -y postgresql` on \
             Debian) so that the tests can start a private one. `bash scripts/test.sh` does the latter."
        ),
    }
}

/// A fresh database, or why there is none.
///
/// # Errors
/// If no server can be reached or started, or the database cannot be created.
pub async fn try_test_database() -> Result<(String, TestDatabase), HarnessError> {
    create_database(&server_url()?).await
}

/// A fresh database on the server of `admin_url` (a URL of a database the user can connect
/// to and create databases from).
///
/// # Errors
/// If the server cannot be reached or the database cannot be created.
pub async fn create_database(admin_url: &str) -> Result<(String, TestDatabase), HarnessError> {
    let admin_url = admin_url.to_owned();
    let name = format!("gl_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect(&admin_url)
        .await
        .map_err(|e| HarnessError(format!("cannot connect to {admin_url}: {e}")))?;
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut conn)
        .await
        .map_err(|e| HarnessError(format!("cannot create database {name} on {admin_url}: {e}")))?;
    let _ = conn.close().await;
    let url = with_database(&admin_url, &name)?;
    Ok((url.clone(), TestDatabase { admin_url, name, url }))
}

/// URL of the server's maintenance database: `GRAPHLOOM_PG_URL`, or the private server
/// (started on first call).
///
/// # Errors
/// If `GRAPHLOOM_PG_URL` is unset and no private server can be started.
pub fn server_url() -> Result<String, HarnessError> {
    if let Ok(url) = std::env::var(URL_ENV) {
        if !url.trim().is_empty() {
            return Ok(url);
        }
    }
    private_server_url().map_err(|e| HarnessError(format!("{URL_ENV} is not set and {e}")))
}

/// URL of this process's private server, started on first call whatever `GRAPHLOOM_PG_URL`
/// says (see the module docs).
///
/// # Errors
/// If no server binaries are found or the server does not start.
pub fn private_server_url() -> Result<String, HarnessError> {
    static SERVER: OnceLock<Result<PrivateServer, String>> = OnceLock::new();
    match SERVER.get_or_init(PrivateServer::start) {
        Ok(server) => Ok(server.url.clone()),
        Err(e) => Err(HarnessError(format!("no private server could be started: {e}"))),
    }
}

/// `url` with its database replaced by `database` (user, host, port and parameters kept).
///
/// # Errors
/// If `url` has no `scheme://`.
pub fn with_database(url: &str, database: &str) -> Result<String, HarnessError> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| HarnessError(format!("not a URL: {url}")))?;
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let query = tail.find('?').map_or("", |i| &tail[i..]);
    Ok(format!("{scheme}://{authority}/{database}{query}"))
}

/// A server started for this process.
struct PrivateServer {
    url: String,
    bin: PathBuf,
    root: bool,
    /// Its temp dir: `data/`, `sock/`, `server.log`.
    dir: PathBuf,
    /// The `postgres` options it was started with (its port among them).
    options: String,
}

/// A PostgreSQL server of a test's own, which the test may stop, start and restart (a
/// database's bad days: a restart, a server down for a while). Started like the private
/// server of the module docs; stopped and removed when dropped (or, if the test process is
/// killed, by a watchdog).
pub struct OwnedServer(PrivateServer);

impl OwnedServer {
    /// Start a new server.
    ///
    /// # Errors
    /// If no server binaries are found or the server does not start.
    pub fn start() -> Result<Self, HarnessError> {
        PrivateServer::start().map(Self).map_err(HarnessError)
    }

    /// URL of its maintenance database.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.0.url
    }

    /// `pg_ctl restart -m <mode>` (`fast`: sessions ended cleanly; `immediate`: the server
    /// killed, recovery at start), waiting until it accepts connections again.
    ///
    /// # Errors
    /// If `pg_ctl` fails.
    pub fn restart(&self, mode: &str) -> Result<(), HarnessError> {
        self.0
            .ctl(&["-m", mode, "-w", "-t", "60", "restart"])
            .map_err(HarnessError)
    }

    /// `pg_ctl stop -m <mode>`: the server is down until [`OwnedServer::start_again`].
    ///
    /// # Errors
    /// If `pg_ctl` fails.
    pub fn stop(&self, mode: &str) -> Result<(), HarnessError> {
        self.0.ctl(&["-m", mode, "-w", "stop"]).map_err(HarnessError)
    }

    /// Start the stopped server again, on the same port.
    ///
    /// # Errors
    /// If `pg_ctl` fails.
    pub fn start_again(&self) -> Result<(), HarnessError> {
        let log = self.0.dir.join("server.log");
        let options = self.0.options.clone();
        self.0
            .ctl(&[
                "-l",
                &log.to_string_lossy(),
                "-w",
                "-t",
                "60",
                "-o",
                &options,
                "start",
            ])
            .map_err(HarnessError)
    }
}

impl Drop for OwnedServer {
    fn drop(&mut self) {
        let _ = self.0.ctl(&["-m", "immediate", "stop"]);
        let _ = std::fs::remove_dir_all(&self.0.dir);
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `program` run as user `postgres` when we are root (postgres refuses to run as root).
fn as_postgres(root: bool, program: &Path) -> Command {
    if root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

fn find_bin_dir() -> Result<PathBuf, String> {
    if let Ok(dir) = std::env::var(BIN_ENV) {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").is_file() {
            return Ok(dir);
        }
        return Err(format!("{BIN_ENV}={} has no initdb", dir.display()));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("initdb").is_file() {
            return Ok(dir);
        }
    }
    Err(
        "no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin and `pg_config --bindir`)"
            .into(),
    )
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

impl PrivateServer {
    fn start() -> Result<Self, String> {
        let bin = find_bin_dir()?;
        let root = is_root();
        let dir = tempfile::Builder::new()
            .prefix("graphloom-pg-")
            .tempdir()
            .map_err(|e| format!("cannot create a temp dir: {e}"))?
            .keep();
        let (data, sock, log) = (dir.join("data"), dir.join("sock"), dir.join("server.log"));
        std::fs::create_dir(&sock).map_err(|e| format!("cannot create {}: {e}", sock.display()))?;
        if root {
            run(
                Command::new("chown").arg("-R").arg("postgres:postgres").arg(&dir),
                "chown of the temp dir to user postgres",
            )?;
        }
        run(
            as_postgres(root, &bin.join("initdb")).arg("-D").arg(&data).args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]),
            "initdb",
        )?;
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port()?;
            let options = format!(
                "-p {port} -h 127.0.0.1 -k {} -c max_connections=300 -c fsync=off",
                sock.display()
            );
            // The server's output goes to its log (pg_ctl -l), never to the test's pipes.
            let started = as_postgres(root, &bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
            if started.success() {
                Self::spawn_watchdog(root, &bin, &dir);
                return Ok(Self {
                    url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
                    bin,
                    root,
                    dir,
                    options,
                });
            }
            last = std::fs::read_to_string(&log).unwrap_or_default();
        }
        let _ = std::fs::remove_dir_all(&dir);
        Err(format!("pg_ctl start failed 5 times; server log:\n{last}"))
    }

    /// `pg_ctl -D <data> <args>`, as user `postgres` when we are root. Its output goes
    /// nowhere: a server it starts must not hold the caller's pipes open. On failure the
    /// error carries the server's log.
    fn ctl(&self, args: &[&str]) -> Result<(), String> {
        let status = as_postgres(self.root, &self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        Err(format!(
            "pg_ctl {} failed ({status}); server log:\n{log}",
            args.join(" ")
        ))
    }

    /// Stop the server and remove its directory once this process has exited.
    fn spawn_watchdog(root: bool, bin: &Path, dir: &Path) {
        let script = r#"
while kill -0 "$0" 2>/dev/null; do sleep 0.5; done
if [ "$3" = 1 ]; then
  runuser -u postgres -- "$1/pg_ctl" -D "$2/data" stop -m immediate >/dev/null 2>&1
else
  "$1/pg_ctl" -D "$2/data" stop -m immediate >/dev/null 2>&1
fi
rm -rf "$2"
"#;
        // `setsid` (util-linux) keeps the watchdog alive if the test's process group is killed.
        let mut cmd = if Path::new("/usr/bin/setsid").exists() {
            let mut c = Command::new("/usr/bin/setsid");
            c.arg("sh");
            c
        } else {
            Command::new("sh")
        };
        let _ = cmd
            .arg("-c")
            .arg(script)
            .arg(std::process::id().to_string())
            .arg(bin)
            .arg(dir)
            .arg(if root { "1" } else { "0" })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_database_of_a_url() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "gl_x").unwrap(),
            "postgres://postgres@127.0.0.1:5432/gl_x"
        );
        assert_eq!(
            with_database("postgres://u:p@h/db?sslmode=disable", "gl_x").unwrap(),
            "postgres://u:p@h/gl_x?sslmode=disable"
        );
        assert_eq!(
            with_database("postgresql://h:1?application_name=a", "gl_x").unwrap(),
            "postgresql://h:1/gl_x?application_name=a"
        );
        assert!(with_database("nope", "x").is_err());
    }
}
