//! `graphloom new`: a crate with one graph, its test, and a `main` that serves it with
//! `graphloom serve`'s options. The files are templates embedded in the command.

use anyhow::{bail, Context as _};
use std::path::{Component, Path, PathBuf};

const CARGO_TOML: &str = include_str!("../templates/new/Cargo.toml.tmpl");
const WORKSPACE: &str = include_str!("../templates/new/workspace.toml.tmpl");
const LIB_RS: &str = include_str!("../templates/new/lib.rs.tmpl");
const MAIN_RS: &str = include_str!("../templates/new/main.rs.tmpl");
const TEST_RS: &str = include_str!("../templates/new/test.rs.tmpl");
const GITIGNORE: &str = include_str!("../templates/new/gitignore.tmpl");

/// The graphloom crates the new crate depends on.
const CRATES: [&str; 4] = [
    "graphloom-core",
    "graphloom-llm",
    "graphloom-server",
    "graphloom-cli",
];

/// What [`new_crate`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCrate {
    /// The crate's directory.
    pub dir: PathBuf,
    /// Its package name.
    pub name: String,
    /// Its graph's id.
    pub graph_id: String,
    /// Where its graphloom dependencies come from: a checkout's path, or the crates'
    /// version on the registry.
    pub graphloom_source: String,
}

/// Write a new crate into `dir` (which must not exist, or be empty): `Cargo.toml`,
/// `src/lib.rs` (the graph), `src/main.rs` (`graphloom`'s commands for it), `tests/graph.rs`.
///
/// Its graphloom dependencies are paths into the graphloom checkout around `dir` when there
/// is one (else the checkout this command was built from, when it is still there), so it
/// builds offline with the checkout's `Cargo.lock`; otherwise they are this version from the
/// registry. Outside a checkout's member folders (`crates/`, `examples/`) the crate is a
/// workspace of its own.
///
/// # Errors
/// When `dir` is not empty, its name is not a valid package name, or a file cannot be
/// written.
pub fn new_crate(dir: &Path) -> anyhow::Result<NewCrate> {
    let dir = absolute(dir)?;
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .unwrap_or_default();
    check_name(&name)?;
    if dir.exists()
        && std::fs::read_dir(&dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        bail!("{} exists and is not empty", dir.display());
    }
    let crate_name = name.replace('-', "_");
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let (checkout, inside) = match enclosing_checkout(parent) {
        Some(root) => (Some(root), true),
        None => (built_from(), false),
    };
    let member = inside
        && checkout
            .as_deref()
            .is_some_and(|root| ["crates", "examples"].iter().any(|m| parent == root.join(m)));
    let (deps, source) = match &checkout {
        Some(root) => {
            let base = if inside {
                relative_to_ancestor(&dir, root)
            } else {
                root.display().to_string()
            };
            let deps = CRATES
                .iter()
                .map(|c| format!("{c} = {{ path = \"{base}/crates/{c}\" }}"))
                .collect::<Vec<_>>()
                .join("\n");
            (deps, format!("path {}", root.display()))
        }
        None => {
            let v = env!("CARGO_PKG_VERSION");
            let deps = CRATES
                .iter()
                .map(|c| format!("{c} = \"{v}\""))
                .collect::<Vec<_>>()
                .join("\n");
            (deps, format!("version {v}"))
        }
    };
    let fill = |t: &str| {
        t.replace("{{name}}", &name)
            .replace("{{crate_name}}", &crate_name)
            .replace("{{graph_id}}", &crate_name)
            .replace("{{graphloom_deps}}", &deps)
            .replace("{{workspace}}", if member { "" } else { WORKSPACE })
    };
    let files = [
        ("Cargo.toml", fill(CARGO_TOML)),
        ("src/lib.rs", fill(LIB_RS)),
        ("src/main.rs", fill(MAIN_RS)),
        ("tests/graph.rs", fill(TEST_RS)),
        (".gitignore", fill(GITIGNORE)),
    ];
    for (path, text) in &files {
        write(&dir.join(path), text)?;
    }
    if let (Some(root), true, false) = (&checkout, inside, member) {
        share_checkout(root, &dir)?;
    }
    // The checkout's lock: the same dependency versions as graphloom's own build, offline.
    if let (Some(root), false) = (&checkout, member) {
        let lock = root.join("Cargo.lock");
        if lock.is_file() {
            std::fs::copy(&lock, dir.join("Cargo.lock"))
                .with_context(|| format!("cannot copy {}", lock.display()))?;
        }
    }
    Ok(NewCrate {
        dir,
        name,
        graph_id: crate_name,
        graphloom_source: source,
    })
}

/// A crate made inside a checkout (a workspace of its own) builds into the checkout's
/// target directory (`$CARGO_TARGET_DIR` when set, else `<checkout>/target`), so nothing the
/// checkout built is built again; and git's local exclude list names it, so the checkout's
/// `git status` stays clean.
fn share_checkout(root: &Path, dir: &Path) -> anyhow::Result<()> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .filter(|t| t.is_absolute())
        .unwrap_or_else(|| root.join("target"));
    let config = format!(
        "# Made inside the graphloom checkout {}: build into its target directory.\n[build]\ntarget-dir = {}\n",
        root.display(),
        toml_string(&target.display().to_string())
    );
    write(&dir.join(".cargo/config.toml"), &config)?;
    let git = root.join(".git");
    if git.is_dir() {
        let exclude = git.join("info/exclude");
        let rel = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
        let line = format!("/{rel}/");
        let mut text = std::fs::read_to_string(&exclude).unwrap_or_default();
        if !text.lines().any(|l| l == line) {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("# made by graphloom new\n{line}\n"));
            write(&exclude, &text)?;
        }
    }
    Ok(())
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).with_context(|| format!("cannot create {}", p.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// `dir` made absolute against the current directory, `.` and `..` resolved by name.
fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    let joined = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()
            .context("cannot read the current directory")?
            .join(dir)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// A package name cargo accepts, that is not a graphloom crate's.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        bail!("`{name}` is not a crate name: use letters, digits, `-` and `_`, starting with a letter");
    }
    if name.starts_with("graphloom") || ["test", "core", "std", "alloc", "proc_macro"].contains(&name) {
        bail!("`{name}` is taken: choose another crate name");
    }
    Ok(())
}

/// Whether `dir` is a graphloom checkout's root.
fn is_checkout(dir: &Path) -> bool {
    dir.join("crates/graphloom-cli/Cargo.toml").is_file() && dir.join("Cargo.toml").is_file()
}

/// The graphloom checkout `dir` is in.
fn enclosing_checkout(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|a| is_checkout(a)).map(Path::to_path_buf)
}

/// The checkout this command was built from, if it is still on this machine.
fn built_from() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?.parent()?;
    is_checkout(root).then(|| root.to_path_buf())
}

/// `../..` from `dir` up to its ancestor `root`.
fn relative_to_ancestor(dir: &Path, root: &Path) -> String {
    let depth = dir
        .strip_prefix(root)
        .map(|p| p.components().count())
        .unwrap_or(0);
    vec![".."; depth].join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        assert!(check_name("my-agent").is_ok());
        assert!(check_name("9lives").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name("graphloom-x").is_err());
        assert_eq!(
            relative_to_ancestor(Path::new("/r/examples/a"), Path::new("/r")),
            "../.."
        );
        assert_eq!(
            absolute(Path::new("/x/./y/../z")).ok(),
            Some(PathBuf::from("/x/z"))
        );
        assert_eq!(toml_string(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
    }

    #[test]
    fn inside_a_checkout_the_crate_shares_its_target_and_stays_out_of_git() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = root.path();
        for f in ["Cargo.toml", "crates/graphloom-cli/Cargo.toml", "Cargo.lock"] {
            write(&root.join(f), "").unwrap_or_else(|e| panic!("{e}"));
        }
        write(&root.join(".git/info/exclude"), "# git's own\n").unwrap_or_else(|e| panic!("{e}"));
        let made = new_crate(&root.join("my-agent")).unwrap_or_else(|e| panic!("{e}"));
        let config = std::fs::read_to_string(made.dir.join(".cargo/config.toml")).unwrap_or_default();
        assert!(config.contains("target-dir = "), "{config}");
        let exclude = std::fs::read_to_string(root.join(".git/info/exclude")).unwrap_or_default();
        assert!(
            exclude.starts_with("# git's own\n") && exclude.contains("\n/my-agent/\n"),
            "{exclude}"
        );
        // A member folder's crate joins the checkout's workspace instead.
        let member = new_crate(&root.join("examples/mine")).unwrap_or_else(|e| panic!("{e}"));
        assert!(!member.dir.join(".cargo").exists());
    }
}
