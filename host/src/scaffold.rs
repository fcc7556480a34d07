//! `wasmsched plugin new`: a plugin project from the templates of
//! `plugins/templates/` (embedded in the binary by `host/build.rs`), in
//! Rust, Go, Python, JavaScript or C. The project builds with its
//! language's toolchain and passes `plugin check` and `plugin test` (its
//! `cases.yaml`) as written; `host/tests/plugin_new.rs` checks that for
//! every language.
//!
//! The contract version is never typed into a template: world files get
//! the version of the contract this binary implements (`wit/plugin.wit`'s
//! package line), Python, JavaScript and C projects get that contract as
//! `wit/deps/plugin.wit`, and their build reads the version from it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// The languages there are templates for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Rust,
    Go,
    Python,
    Js,
    C,
}

impl Lang {
    pub const ALL: [Lang; 5] = [Lang::Rust, Lang::Go, Lang::Python, Lang::Js, Lang::C];

    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Go => "go",
            Lang::Python => "python",
            Lang::Js => "js",
            Lang::C => "c",
        }
    }

    /// Whether the project carries the contract's WIT (no SDK states it).
    fn needs_wit(self) -> bool {
        matches!(self, Lang::Python | Lang::Js | Lang::C)
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Lang {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Lang::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| format!("unknown language {s:?} (rust, go, python, js or c)"))
    }
}

/// What to make.
#[derive(Debug, Clone)]
pub struct Options {
    /// The plugin's name: lower-case words joined by `-` (a WIT name).
    pub name: String,
    pub lang: Lang,
    /// Where to write the project; must not exist, or be empty.
    pub dir: PathBuf,
    /// Where a Rust or Go project takes the SDK from.
    pub sdk: Sdk,
}

/// Where a project's SDK comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdk {
    /// The checkout this binary was built from when it is there (its
    /// `plugins/sdk`, `plugins/sdk-go`), else the published crate (Rust).
    Default,
    /// This wasmsched checkout's.
    Checkout(PathBuf),
    /// The crate on crates.io (`wasmsched-plugin-sdk = "VERSION"`); the Go
    /// SDK's module path is not served yet.
    CratesIo,
}

impl FromStr for Sdk {
    type Err = String;

    /// `crates.io`, or a checkout's directory.
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "crates.io" => Sdk::CratesIo,
            dir => Sdk::Checkout(PathBuf::from(dir)),
        })
    }
}

/// The checkout this binary was built from.
pub fn build_checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Checks a plugin name: it names a crate, a Go module's last element and
/// a WIT world, so lower-case words of letters and digits, each starting
/// with a letter, joined by `-`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.split('-').all(|w| {
            w.as_bytes().first().is_some_and(u8::is_ascii_lowercase)
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid plugin name {name:?}: lower-case words of letters and digits joined by '-', each starting with a letter (e.g. my-policy)"
        ))
    }
}

/// The contract version this binary implements.
pub fn contract_version() -> &'static str {
    crate::wasm::CONTRACT_VERSION
}

/// Writes the project; returns the files written (relative to the
/// project's directory). Errors are one line naming the cause.
pub fn create(o: &Options) -> Result<Vec<PathBuf>, String> {
    check_name(&o.name)?;
    let shown = o.dir.display();
    if let Ok(mut entries) = std::fs::read_dir(&o.dir) {
        if entries.next().is_some() {
            return Err(format!("{shown} exists and is not empty"));
        }
    } else if o.dir.exists() {
        return Err(format!("{shown} exists and is not a directory"));
    }
    let vars = variables(o)?;
    let mut files: Vec<(PathBuf, String, bool)> = Vec::new();
    for (path, text) in TEMPLATES {
        let Some((group, rest)) = path.split_once('/') else {
            continue;
        };
        let wanted =
            group == o.lang.as_str() || group == "common" || (group == "wit" && o.lang.needs_wit());
        if !wanted {
            continue;
        }
        let rest = if group == "wit" {
            format!("wit/{rest}")
        } else {
            rest.to_string()
        };
        let out = match rest.strip_suffix(".tmpl") {
            Some(r) => r.to_string(),
            None if rest == "gitignore" => ".gitignore".to_string(),
            None => rest,
        };
        let executable = out.ends_with(".sh");
        files.push((PathBuf::from(out), render(text, &vars), executable));
    }
    if o.lang.needs_wit() {
        files.push((
            "wit/deps/plugin.wit".into(),
            CONTRACT_WIT.to_string(),
            false,
        ));
    }
    for (rel, text, executable) in &files {
        let path = o.dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        #[cfg(unix)]
        if *executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    Ok(files.into_iter().map(|(p, _, _)| p).collect())
}

/// The placeholders' values for `o`.
fn variables(o: &Options) -> Result<Vec<(&'static str, String)>, String> {
    let checkout = match &o.sdk {
        Sdk::Default => {
            Some(build_checkout()).filter(|c| c.join("plugins/sdk/Cargo.toml").is_file())
        }
        Sdk::Checkout(dir) => {
            if !dir.join("plugins/sdk/Cargo.toml").is_file() {
                return Err(format!(
                    "{} has no plugins/sdk/Cargo.toml: --sdk names a wasmsched checkout (or crates.io)",
                    dir.display()
                ));
            }
            Some(dir.clone())
        }
        Sdk::CratesIo => None,
    };
    let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p);
    let rust_sdk = match &checkout {
        Some(c) => format!(
            "wasmsched-plugin-sdk = {{ path = {:?} }}",
            absolute(c.join("plugins/sdk")).display().to_string()
        ),
        None => format!("wasmsched-plugin-sdk = \"{}\"", env!("CARGO_PKG_VERSION")),
    };
    let go_sdk = checkout
        .map(|c| c.join("plugins/sdk-go"))
        .filter(|g| g.join("go.mod").is_file());
    let go_sdk_replace = match go_sdk {
        Some(g) => format!("replace wasmsched.io/plugin-sdk-go => {}", absolute(g).display()),
        None if o.lang == Lang::Go => {
            return Err(
                "the Go SDK's module path (wasmsched.io/plugin-sdk-go) is not served yet: pass --sdk DIR, a wasmsched checkout".into(),
            )
        }
        None => String::new(),
    };
    Ok(vec![
        ("name", o.name.clone()),
        ("name_snake", o.name.replace('-', "_")),
        ("contract_version", contract_version().to_string()),
        ("rust_sdk", rust_sdk),
        ("go_sdk_replace", go_sdk_replace),
    ])
}

fn render(text: &str, vars: &[(&str, String)]) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_wit_names() {
        for ok in ["my-policy", "gpu2", "a-b-c"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "My-policy",
            "my_policy",
            "2gpu",
            "my--policy",
            "my-2",
            "-a",
        ] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_language_renders_without_leftover_placeholders() {
        for lang in Lang::ALL {
            let dir = tempfile::tempdir().unwrap();
            let o = Options {
                name: "my-policy".into(),
                lang,
                dir: dir.path().join("p"),
                sdk: Sdk::Default,
            };
            let files = create(&o).unwrap();
            assert!(files.iter().any(|f| f == Path::new("cases.yaml")), "{lang}");
            for f in &files {
                let text = std::fs::read_to_string(o.dir.join(f)).unwrap();
                let left = text.split("{{").skip(1).any(|rest| {
                    rest.split_once("}}").is_some_and(|(name, _)| {
                        !name.is_empty()
                            && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                    })
                });
                assert!(!left, "{lang}: {} keeps a placeholder", f.display());
            }
            // A second time into the same directory: refused.
            let e = create(&o).unwrap_err();
            assert!(e.ends_with("exists and is not empty"), "{e}");
        }
    }
}
