//! The server's modules stay in their layers: config -> host -> service and jobs -> http.
//! A module imports only from its own layer or the layers below it, and the modules'
//! imports form no circle. This test reads the crate's source files (outside tests) and
//! fails naming the file and the import that breaks the rule; a new top-level module
//! must be given its layer in [`LAYERS`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each top-level module of `src/` and its layer, lowest first.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "config",
        &[
            // Settings, errors, metrics and telemetry, storage, and the wire format (the
            // `graphloom-server-wire` crate, read under these names).
            "config",
            "error",
            "start_error",
            "metrics",
            "telemetry",
            "outage",
            "models",
            "db",
            "run",
            "protocol",
            "wire",
        ],
    ),
    (
        "host",
        &["host", "broker", "signals", "auth", "owner_store", "state"],
    ),
    (
        "service and jobs",
        &["service", "worker", "scheduler", "webhook", "retention"],
    ),
    ("http", &["api", "ui", "custom", "http", "app"]),
];

/// The root module: it declares the others and re-exports the public API (`crate::Server`,
/// `crate::factory`, ...), so a module that names the root directly sits in the top layer.
const ROOT: &str = "lib";

fn layer_of(module: &str) -> Option<usize> {
    if module == ROOT {
        return Some(LAYERS.len() - 1);
    }
    LAYERS.iter().position(|(_, mods)| mods.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.strip_suffix(".rs").map(str::to_owned).unwrap_or(first)
}

/// The code of a file without comments and without its `#[cfg(test)]` items (tests may
/// reach anywhere in the crate).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth = 0i64;
    let mut cfg_test = false;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let trimmed = line.trim();
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            cfg_test = true;
            continue;
        }
        let opens = i64::try_from(line.matches('{').count()).unwrap();
        let closes = i64::try_from(line.matches('}').count()).unwrap();
        if cfg_test && skip_depth.is_none() {
            cfg_test = false;
            if trimmed.ends_with(';') {
                // `#[cfg(test)] mod tests;` or a test-only `use`.
                continue;
            }
            skip_depth = Some(depth);
        }
        depth += opens - closes;
        if let Some(d) = skip_depth {
            if depth <= d && (opens > 0 || closes > 0) {
                skip_depth = None;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The top-level names a file takes from `crate::`: `crate::a::..`, and each name of
/// `crate::{a, b::..}`.
fn imports_of(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `graphloom_crate::`, not this crate
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    names.insert(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

/// The module a name taken from `crate::` is: a top-level module, or (any other name,
/// such as `crate::Server`) the root.
fn target(name: &str, modules: &BTreeSet<String>) -> String {
    if modules.contains(name) {
        name.to_owned()
    } else {
        ROOT.to_owned()
    }
}

#[test]
fn each_module_imports_only_its_own_layer_and_those_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    // The wire crate's modules, read under the server's names (see `lib.rs`).
    modules.extend(["run", "protocol", "wire"].map(str::to_owned));
    let unplaced: Vec<&String> = modules
        .iter()
        .filter(|m| layer_of(m).is_none() && !m.ends_with("tests"))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules without a layer in LAYERS: {unplaced:?}"
    );

    let mut wrong = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let from = module_of(&src, file);
        let name = file.file_name().unwrap().to_string_lossy();
        if from == ROOT || from.ends_with("tests") || name.ends_with("tests.rs") {
            continue; // the root declares everything; test files reach anywhere
        }
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for name in imports_of(&code) {
            let to = target(&name, &modules);
            if to == from {
                continue;
            }
            let (lf, lt) = (layer_of(&from).unwrap(), layer_of(&to).unwrap());
            if lt > lf {
                wrong.push(format!(
                    "{} ({} layer) imports crate::{name} ({} layer)",
                    file.strip_prefix(&src).unwrap().display(),
                    LAYERS[lf].0,
                    LAYERS[lt].0,
                ));
            }
            graph.entry(from.clone()).or_default().insert(to);
        }
    }
    assert!(
        wrong.is_empty(),
        "imports of a layer above:\n{}",
        wrong.join("\n")
    );
    assert_eq!(
        circles(&graph),
        Vec::<Vec<String>>::new(),
        "modules that import each other"
    );
}

/// The modules that import each other in a loop (strongly connected components of more
/// than one module).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Two modules are in one circle when each reaches the other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|m| (m, reach(m))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (m, r) in &reaches {
        let mut circle: Vec<String> = r
            .iter()
            .filter(|o| reaches.get(o).is_some_and(|back| back.contains(*m)))
            .cloned()
            .collect();
        if circle.len() > 1 || (circle.len() == 1 && circle[0] != **m) {
            if !circle.contains(*m) {
                circle.push((*m).clone());
            }
            circle.sort();
            if !out.contains(&circle) {
                out.push(circle);
            }
        }
    }
    out
}

#[test]
fn the_reader_sees_imports_and_skips_tests_and_comments() {
    let code = code_of(
        "use crate::{api::x, db};\n// crate::ui in a comment\nfn f() { crate::service::g(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::worker;\n}\n",
    );
    let names: Vec<String> = imports_of(&code).into_iter().collect();
    assert_eq!(names, ["api", "db", "service"]);
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
        ("c".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]
    .into();
    assert_eq!(circles(&g), vec![vec!["a".to_owned(), "b".to_owned()]]);
}
