//! The plugin docs against the contract: `wit/plugin.wit` is parsed
//! (package version, interfaces and their functions, worlds and their
//! exports) and
//!
//! - docs/writing-plugins.md must document every interface with each
//!   function's signature exactly as the WIT declares it, and every world
//!   with its exports (a new interface fails here until its docs are
//!   written);
//! - docs/contract.md must give every function of every interface a cost
//!   per call;
//! - those two and README.md must not name an interface, function or
//!   export the WIT does not have (`iface.function`, `function(...)`,
//!   `wasmsched:plugin/iface@version`, "exports `x`"), nor a contract
//!   version it does not know (the package line's, `wit/history/*`, and
//!   those its own comments name), and must not state the current version
//!   themselves: it is the package line's, stated once.
//!
//! Each check is a function returning the problems it found; the tests at
//! the end feed them altered documents to show that they catch what they
//! are for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

// ---- the WIT ----------------------------------------------------------

#[derive(Debug, Default)]
struct Wit {
    version: String,
    /// interface -> function -> signature (`func(...) -> ...`, whitespace
    /// removed).
    interfaces: BTreeMap<String, BTreeMap<String, String>>,
    /// world -> (imports, exports).
    worlds: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)>,
    /// Versions its comments name (`Added in 0.2.0`, `Changes since 0.1.0`).
    mentioned_versions: BTreeSet<String>,
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// A `major.minor.patch` version at the start of `s`.
fn version_at(s: &str) -> Option<&str> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let v = s[..end].trim_end_matches('.');
    (v.split('.').count() == 3 && v.split('.').all(|p| !p.is_empty())).then_some(v)
}

fn parse_wit(text: &str) -> Wit {
    let mut wit = Wit::default();
    // Versions in comments.
    for line in text.lines() {
        if let Some(c) = line.find("//") {
            let comment = &line[c..];
            for (i, _) in comment.match_indices(|c: char| c.is_ascii_digit()) {
                if i > 0 && comment[..i].ends_with(|c: char| c.is_ascii_digit() || c == '.') {
                    continue;
                }
                if let Some(v) = version_at(&comment[i..]) {
                    wit.mentioned_versions.insert(v.to_string());
                }
            }
        }
    }
    let code: String = text
        .lines()
        .map(|l| l.find("//").map_or(l, |c| &l[..c]))
        .collect::<Vec<_>>()
        .join("\n");
    // Top-level items, then their statements at depth 1.
    let mut depth = 0;
    let mut head = String::new();
    let mut stmt = String::new();
    let mut current: Option<(String, String)> = None; // (kind, name)
    for ch in code.chars() {
        match ch {
            '{' => {
                depth += 1;
                if depth == 1 {
                    let words: Vec<&str> = head.split_whitespace().collect();
                    if let [kind, name] = words.as_slice() {
                        current = Some((kind.to_string(), name.to_string()));
                        match *kind {
                            "interface" => {
                                wit.interfaces.entry(name.to_string()).or_default();
                            }
                            "world" => {
                                wit.worlds.entry(name.to_string()).or_default();
                            }
                            _ => {}
                        }
                    }
                    head.clear();
                }
                stmt.clear();
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    current = None;
                }
                stmt.clear();
            }
            ';' if depth == 0 => {
                if let Some(v) = head.trim().strip_prefix("package wasmsched:plugin@") {
                    wit.version = v.trim().to_string();
                }
                head.clear();
            }
            ';' if depth == 1 => {
                let s = stmt.trim().to_string();
                stmt.clear();
                match &current {
                    Some((k, iface)) if k == "interface" => {
                        if let Some((name, sig)) = s.split_once(':') {
                            if sig.trim_start().starts_with("func") {
                                wit.interfaces
                                    .get_mut(iface)
                                    .unwrap()
                                    .insert(name.trim().to_string(), squash(sig));
                            }
                        }
                    }
                    Some((k, world)) if k == "world" => {
                        let w = wit.worlds.get_mut(world).unwrap();
                        if let Some(i) = s.strip_prefix("import ") {
                            w.0.insert(i.trim().to_string());
                        } else if let Some(e) = s.strip_prefix("export ") {
                            w.1.insert(e.trim().to_string());
                        }
                    }
                    _ => {}
                }
            }
            c if depth == 0 => head.push(c),
            c if depth == 1 => stmt.push(c),
            _ => {}
        }
    }
    assert!(
        !wit.version.is_empty(),
        "no `package wasmsched:plugin@X.Y.Z;` line"
    );
    wit
}

/// The current contract and the ones `wit/history/` keeps, by version.
fn contracts() -> BTreeMap<String, Wit> {
    let current = parse_wit(&read("wit/plugin.wit"));
    let mut all = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir(repo().join("wit/history")) {
        for e in dir.flatten() {
            let file = e.path().join("plugin.wit");
            if let Ok(text) = std::fs::read_to_string(&file) {
                let w = parse_wit(&text);
                all.insert(w.version.clone(), w);
            }
        }
    }
    all.insert(current.version.clone(), current);
    all
}

// ---- markdown ------------------------------------------------------------

/// The rows of the first table whose header's first cell is `first`
/// (cells trimmed), without the header and the separator.
fn table(md: &str, first: &str) -> Option<Vec<Vec<String>>> {
    let lines: Vec<&str> = md.lines().collect();
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let start = lines
        .iter()
        .position(|l| l.trim_start().starts_with('|') && cells(l)[0] == first)?;
    Some(
        lines[start + 2..]
            .iter()
            .take_while(|l| l.trim_start().starts_with('|'))
            .map(|l| cells(l))
            .collect(),
    )
}

/// The code spans of a table cell.
fn spans_of(cell: &str) -> Vec<String> {
    gaps_and_spans(cell).into_iter().map(|(_, s)| s).collect()
}

// ---- the checks --------------------------------------------------------------

/// writing-plugins.md's table of interfaces (`| interface | functions |
/// ...`): every interface but `types`, each function's signature as the
/// WIT declares it.
fn check_interface_table(md: &str, wit: &Wit) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(rows) = table(md, "interface") else {
        return vec!["no table whose first column is `interface`".into()];
    };
    let mut seen = BTreeSet::new();
    for row in rows {
        let Some(iface) = spans_of(&row[0]).into_iter().next() else {
            problems.push(format!("a row names no interface: {row:?}"));
            continue;
        };
        let Some(functions) = wit.interfaces.get(&iface) else {
            problems.push(format!("interface `{iface}` is not in wit/plugin.wit"));
            continue;
        };
        seen.insert(iface.clone());
        let documented: Vec<String> = row.get(1).map(|c| spans_of(c)).unwrap_or_default();
        let mut named = BTreeSet::new();
        for sig in documented {
            let Some((name, rest)) = sig.split_once(':') else {
                problems.push(format!("`{iface}`: `{sig}` is not `name: func(...)`"));
                continue;
            };
            let name = name.trim();
            match functions.get(name) {
                None => problems.push(format!(
                    "`{iface}` has no function `{name}` in wit/plugin.wit"
                )),
                Some(want) if *want != squash(rest) => problems.push(format!(
                    "`{iface}.{name}`: documented as `{}`, the WIT says `{want}`",
                    squash(rest)
                )),
                Some(_) => {}
            }
            named.insert(name.to_string());
        }
        for f in functions.keys() {
            if !named.contains(f) {
                problems.push(format!("`{iface}.{f}` is not documented"));
            }
        }
    }
    for iface in wit.interfaces.keys() {
        if iface != "types" && !seen.contains(iface) {
            problems.push(format!("interface `{iface}` is not documented"));
        }
    }
    problems
}

/// writing-plugins.md's table of worlds (`| world | exports |`): every
/// world of the WIT, with exactly its exports.
fn check_world_table(md: &str, wit: &Wit) -> Vec<String> {
    let Some(rows) = table(md, "world") else {
        return vec!["no table whose first column is `world`".into()];
    };
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for row in rows {
        let Some(world) = spans_of(&row[0]).into_iter().next() else {
            continue;
        };
        let Some((_, exports)) = wit.worlds.get(&world) else {
            problems.push(format!("world `{world}` is not in wit/plugin.wit"));
            continue;
        };
        seen.insert(world.clone());
        let documented: BTreeSet<String> = row
            .get(1)
            .map(|c| spans_of(c))
            .unwrap_or_default()
            .into_iter()
            .collect();
        if documented != *exports {
            problems.push(format!(
                "world `{world}`: documented exports {documented:?}, the WIT's {exports:?}"
            ));
        }
    }
    for w in wit.worlds.keys() {
        if !seen.contains(w) {
            problems.push(format!("world `{w}` is not documented"));
        }
    }
    problems
}

/// contract.md: every function of every interface (but `types`) in a row of
/// a table with a `cost per call` column, the cost given.
fn check_costs(md: &str, wit: &Wit) -> Vec<String> {
    let mut priced = BTreeSet::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut column = None;
    for line in lines {
        let t = line.trim();
        if !t.starts_with('|') {
            column = None;
            continue;
        }
        let cells: Vec<String> = t
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        if let Some(c) = cells.iter().position(|c| c == "cost per call") {
            column = Some(c);
            continue;
        }
        let Some(c) = column else { continue };
        let cost = cells.get(c).map(String::as_str).unwrap_or("");
        if cost.is_empty() || cost == "-" || cells[0].starts_with("---") {
            continue;
        }
        for span in spans_of(&cells[0]) {
            priced.insert(span.split('(').next().unwrap_or("").to_string());
        }
    }
    let mut problems = Vec::new();
    for (iface, functions) in &wit.interfaces {
        for f in functions.keys() {
            if !priced.contains(&format!("{iface}.{f}")) {
                problems.push(format!(
                    "docs/contract.md gives no cost per call for `{iface}.{f}`"
                ));
            }
        }
    }
    problems
}

/// Names and versions in `md` that the contracts do not have, and
/// statements of the current version (it is the package line's).
fn check_names(
    md: &str,
    file: &str,
    contracts: &BTreeMap<String, Wit>,
    current: &Wit,
) -> Vec<String> {
    let mut known_versions: BTreeSet<String> = contracts.keys().cloned().collect();
    known_versions.extend(current.mentioned_versions.iter().cloned());
    let functions: BTreeSet<&String> = current.interfaces.values().flat_map(|f| f.keys()).collect();
    let mut problems = Vec::new();
    let mut problem = |line: usize, what: String| problems.push(format!("{file}:{line}: {what}"));
    // Qualified names anywhere, code blocks included.
    for (n, line) in md.lines().enumerate() {
        let n = n + 1;
        for (i, _) in line.match_indices("wasmsched:plugin") {
            let rest = &line[i + "wasmsched:plugin".len()..];
            if let Some(v) = rest.strip_prefix('@') {
                if version_at(v).is_some() {
                    problem(n, format!(
                        "states the contract version (`wasmsched:plugin@{}`): say where it comes from (the package line of wit/plugin.wit) instead",
                        version_at(v).unwrap()
                    ));
                }
            } else if let Some(r) = rest.strip_prefix('/') {
                let iface: String = r
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                    .collect();
                let after = &r[iface.len()..];
                let version = after.strip_prefix('@').and_then(version_at);
                match version {
                    Some(v) if !known_versions.contains(v) => problem(
                        n,
                        format!("names contract version {v}, which wit/ does not have"),
                    ),
                    Some(v) => {
                        let wit = contracts.get(v).unwrap_or(current);
                        if !iface.is_empty() && !wit.interfaces.contains_key(&iface) {
                            problem(
                                n,
                                format!("names `wasmsched:plugin/{iface}@{v}`: no such interface"),
                            );
                        }
                    }
                    None if !iface.is_empty() && !current.interfaces.contains_key(&iface) => {
                        problem(
                            n,
                            format!("names `wasmsched:plugin/{iface}`: no such interface"),
                        )
                    }
                    None => {}
                }
            }
        }
        // `contract-version` returns what the SDK (or the build) fills in.
        let lower = line.to_ascii_lowercase();
        if lower.contains("contract-version")
            || lower.contains("contract_version")
            || lower.contains("contractversion")
        {
            for q in ['"', '\''] {
                for part in line.split(q).skip(1).step_by(2) {
                    if version_at(part).is_some_and(|v| v.len() == part.len()) {
                        problem(n, format!("gives `contract-version` a literal version {q}{part}{q}: the SDK or the build fills it in from the package line"));
                    }
                }
            }
        }
    }
    // Inline code outside code blocks: `iface.function`, `function(...)`,
    // and the names in "exports `a`, `b` and `c`".
    let mut fenced = false;
    for (n, line) in md.lines().enumerate() {
        let n = n + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_list = false;
        for (gap, span) in gaps_and_spans(line) {
            if let Some((iface, f)) = span.split('(').next().unwrap_or("").split_once('.') {
                // `types` holds records, not functions (`types.go` is a file).
                if let Some(fs) = current.interfaces.get(iface).filter(|_| iface != "types") {
                    if kebab(f) && !fs.contains_key(f) {
                        problem(
                            n,
                            format!("`{span}`: interface `{iface}` has no function `{f}`"),
                        );
                    }
                }
            }
            if let Some((name, _)) = span.split_once('(') {
                if kebab(name) && name.contains('-') && !functions.contains(&name.to_string()) {
                    problem(n, format!("`{span}`: the WIT has no function `{name}`"));
                }
            }
            let g = gap.trim().to_ascii_lowercase();
            let starts = ["export", "exports", "exporting"].iter().any(|v| {
                g.ends_with(v)
                    || g.ends_with(&format!("{v} any of"))
                    || g.ends_with(&format!("{v} one of"))
            });
            let continues = in_list
                && [
                    ",",
                    "and",
                    "or",
                    ", and",
                    ", or",
                    "plus",
                    "plus any of",
                    ", plus any of",
                    "/",
                ]
                .contains(&g.as_str());
            in_list = starts || continues;
            if in_list && kebab(&span) && !current.interfaces.contains_key(&span) {
                problem(
                    n,
                    format!("says a plugin exports `{span}`: the WIT has no such interface"),
                );
            }
        }
    }
    problems
}

/// A lower-case kebab-case name.
fn kebab(s: &str) -> bool {
    !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A line's code spans, each with the text between it and the previous
/// one (or the line's start).
fn gaps_and_spans(line: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let Some(len) = rest[start + 1..].find('`') else {
            break;
        };
        out.push((
            rest[..start].to_string(),
            rest[start + 1..start + 1 + len].to_string(),
        ));
        rest = &rest[start + 2 + len..];
    }
    out
}

fn report(problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{} problem(s):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

// ---- the tests ---------------------------------------------------------------

#[test]
fn writing_plugins_documents_every_interface_and_function_as_the_wit_declares_them() {
    report(check_interface_table(
        &read("docs/writing-plugins.md"),
        &parse_wit(&read("wit/plugin.wit")),
    ));
}

#[test]
fn writing_plugins_documents_every_world_with_its_exports() {
    report(check_world_table(
        &read("docs/writing-plugins.md"),
        &parse_wit(&read("wit/plugin.wit")),
    ));
}

#[test]
fn contract_md_gives_every_call_its_cost() {
    report(check_costs(
        &read("docs/contract.md"),
        &parse_wit(&read("wit/plugin.wit")),
    ));
}

#[test]
fn plugin_docs_name_only_what_the_wit_has() {
    let contracts = contracts();
    let current = parse_wit(&read("wit/plugin.wit"));
    let mut problems = Vec::new();
    for file in ["docs/writing-plugins.md", "docs/contract.md", "README.md"] {
        problems.extend(check_names(&read(file), file, &contracts, &current));
    }
    report(problems);
}

#[test]
fn the_wit_parses_as_the_host_reads_it() {
    let wit = parse_wit(&read("wit/plugin.wit"));
    assert_eq!(wit.version, wasmsched::wasm::CONTRACT_VERSION);
    let lifecycle = &wit.interfaces["lifecycle"];
    assert_eq!(lifecycle["init"], "func(args:string)->result<_,string>");
    assert!(wit.worlds["plugin"].1.contains("lifecycle"));
    assert!(wit.worlds["plugin"].0.contains("host"));
}

/// Each check catches what it is for: the real documents, altered.
#[test]
fn the_checks_catch_stale_docs() {
    let wit = parse_wit(&read("wit/plugin.wit"));
    let contracts = contracts();
    let writing = read("docs/writing-plugins.md");
    let contract = read("docs/contract.md");
    // An interface the WIT gains (a minor bump) and the docs lack.
    let mut newer = parse_wit(&read("wit/plugin.wit"));
    newer.interfaces.insert(
        "device-ranking".into(),
        BTreeMap::from([("rank".into(), "func()".into())]),
    );
    let p = check_interface_table(&writing, &newer);
    assert!(
        p.iter()
            .any(|p| p == "interface `device-ranking` is not documented"),
        "{p:?}"
    );
    let p = check_costs(&contract, &newer);
    assert!(
        p.iter().any(|p| p.contains("`device-ranking.rank`")),
        "{p:?}"
    );
    // A cost row removed.
    let without: String = contract
        .lines()
        .filter(|l| !l.contains("`score.score("))
        .collect::<Vec<_>>()
        .join("\n");
    let p = check_costs(&without, &wit);
    assert_eq!(
        p,
        ["docs/contract.md gives no cost per call for `score.score`"]
    );
    // A signature that drifted.
    let drifted = writing.replacen(
        "score: func(nodes: list<node-index>)",
        "score: func(nodes: list<u32>)",
        1,
    );
    assert_ne!(drifted, writing, "the table shows score's signature");
    let p = check_interface_table(&drifted, &wit);
    assert!(
        p.iter()
            .any(|p| p.starts_with("`score.score`: documented as")),
        "{p:?}"
    );
    // The issue's first plugin: an old version stated, a made-up export.
    for (text, want) in [
        ("contract-version returns \"0.1.0\"", "literal version"),
        (
            "the contract is `wasmsched:plugin@0.1.0`",
            "states the contract version",
        ),
        (
            "`export wasmsched:plugin/filter@0.9.0;`",
            "names contract version 0.9.0",
        ),
        (
            "call `lifecycle.teardown` first",
            "has no function `teardown`",
        ),
        (
            "it exports `filter`, `rank-devices` and `score`",
            "exports `rank-devices`",
        ),
        ("`pre-score(nodes)` runs before", "no function `pre-score`"),
    ] {
        let p = check_names(text, "x.md", &contracts, &wit);
        assert!(p.iter().any(|p| p.contains(want)), "{text}: {p:?}");
    }
    // What is right passes.
    for text in [
        "it exports `filter`, `score` and `normalize-score`",
        "`lifecycle.cycle-start` once per pod; `filter(nodes)` in batches",
        "`export wasmsched:plugin/filter@0.1.0;` (a 0.1 component)",
    ] {
        assert_eq!(
            check_names(text, "x.md", &contracts, &wit),
            Vec::<String>::new(),
            "{text}"
        );
    }
}
