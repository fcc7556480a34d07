//! The docs' runnable blocks: every fenced code block of README.md and
//! docs/*.md whose info string has the word `runnable` (```` ```sh runnable
//! ````; GitHub highlights by the first word and ignores the rest) is run
//! with bash from the repository root, the built binary first on `PATH` as
//! `wasmsched`, and must exit 0. `cargo run --release -- ARGS` in a block
//! stands for `wasmsched ARGS` (a shell function): the README shows the
//! command a fresh clone runs, the test runs the binary it was built with;
//! any other `cargo` command in a runnable block fails.
//!
//! A block whose info string has the word `output` (```` ```text output
//! ````) shows the stdout of the closest runnable block before it in the
//! same file (prose and blocks that are not runnable may stand between
//! them; a runnable block has at most one output block). The whole script's
//! stdout is compared with it line by line, exactly, after trimming each
//! line's trailing whitespace and the blank lines at the end; a line that is
//! exactly `...` stands for any number of lines (zero or more), for abridged
//! output. stderr is not compared (it is printed when a block fails).
//!
//! On failure the test prints, for each failing block, the file, the line,
//! the command, the exit status, a diff (`-` shown, `+` printed) and stderr.
//! It fails when there is no runnable block or no output block at all.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The files whose blocks run: README.md and docs/*.md, in name order.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A fenced code block: its first line's number (the fence), the words of
/// its info string, and its lines (the fence's indentation removed).
#[derive(Debug)]
struct Block {
    line: usize,
    words: Vec<String>,
    body: Vec<String>,
}

impl Block {
    fn has(&self, word: &str) -> bool {
        self.words.iter().any(|w| w == word)
    }
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        let indent = lines[i].len() - trimmed.len();
        let ticks = trimmed.len() - trimmed.trim_start_matches('`').len();
        if ticks < 3 {
            i += 1;
            continue;
        }
        let words = trimmed[ticks..]
            .split_whitespace()
            .map(str::to_string)
            .collect();
        let mut body = Vec::new();
        let mut j = i + 1;
        while j < lines.len() {
            let t = lines[j].trim();
            if t.len() >= ticks && t.chars().all(|c| c == '`') {
                break;
            }
            let l = lines[j];
            let strip = l.len() - l.trim_start_matches(' ').len();
            body.push(l[strip.min(indent)..].to_string());
            j += 1;
        }
        out.push(Block {
            line: i + 1,
            words,
            body,
        });
        i = j + 1;
    }
    out
}

/// A runnable block and the output block that goes with it.
#[derive(Debug)]
struct Runnable {
    line: usize,
    script: String,
    /// (line of the output block, its lines).
    expected: Option<(usize, Vec<String>)>,
}

/// The runnable blocks of one file, or what is wrong with its markers.
fn runnables(text: &str) -> Result<Vec<Runnable>, String> {
    let mut out: Vec<Runnable> = Vec::new();
    for b in blocks(text) {
        match (b.has("runnable"), b.has("output")) {
            (true, true) => {
                return Err(format!(
                    "line {}: a block is `runnable` or `output`, not both",
                    b.line
                ))
            }
            (true, false) => out.push(Runnable {
                line: b.line,
                script: b.body.join("\n"),
                expected: None,
            }),
            (false, true) => match out.last_mut() {
                None => {
                    return Err(format!(
                        "line {}: an `output` block with no runnable block before it",
                        b.line
                    ))
                }
                Some(r) if r.expected.is_some() => {
                    return Err(format!(
                        "line {}: a second `output` block for the runnable block of line {}",
                        b.line, r.line
                    ))
                }
                Some(r) => r.expected = Some((b.line, b.body)),
            },
            (false, false) => {}
        }
    }
    Ok(out)
}

/// Lines with trailing whitespace trimmed, blank lines at the end dropped.
fn normalize<S: AsRef<str>>(lines: &[S]) -> Vec<String> {
    let mut v: Vec<String> = lines
        .iter()
        .map(|l| l.as_ref().trim_end().to_string())
        .collect();
    while v.last().is_some_and(|l| l.is_empty()) {
        v.pop();
    }
    v
}

/// Whether `actual` is what `expected` shows, a `...` line standing for
/// any number of lines.
fn matches(expected: &[String], actual: &[String]) -> bool {
    // reach[j]: expected[..i] can produce actual[..j].
    let mut reach = vec![false; actual.len() + 1];
    reach[0] = true;
    for e in expected {
        let mut next = vec![false; actual.len() + 1];
        if e == "..." {
            let mut any = false;
            for (n, r) in next.iter_mut().zip(&reach) {
                any |= *r;
                *n = any;
            }
        } else {
            for (j, a) in actual.iter().enumerate() {
                next[j + 1] = reach[j] && a == e;
            }
        }
        reach = next;
    }
    reach[actual.len()]
}

/// A line diff: `-` shown in the docs only, `+` printed only, `  ` both;
/// the printed lines a `...` stands for are folded into one `  ... (N
/// lines)`. The alignment with the fewest `-` and `+` lines.
fn diff(expected: &[String], actual: &[String]) -> String {
    let (n, m) = (expected.len(), actual.len());
    // cost[i][j]: the fewest `-`/`+` lines aligning expected[i..] with actual[j..].
    let mut cost = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..=n).rev() {
        for j in (0..=m).rev() {
            cost[i][j] = if i == n {
                m - j
            } else if j == m {
                cost[i + 1][j] + usize::from(expected[i] != "...")
            } else if expected[i] == "..." {
                cost[i + 1][j].min(cost[i][j + 1])
            } else if expected[i] == actual[j] {
                cost[i + 1][j + 1]
            } else {
                (cost[i + 1][j] + 1).min(cost[i][j + 1] + 1)
            };
        }
    }
    let (mut i, mut j, mut out, mut folded) = (0, 0, String::new(), 0);
    let flush = |out: &mut String, folded: &mut usize| {
        if *folded > 0 {
            *out += &format!("  ... ({} line(s))\n", *folded);
            *folded = 0;
        }
    };
    while i < n || j < m {
        if i < n && expected[i] == "..." {
            if j < m && cost[i][j] == cost[i][j + 1] {
                folded += 1;
                j += 1;
            } else {
                i += 1;
                flush(&mut out, &mut folded);
            }
            continue;
        }
        if i < n && j < m && expected[i] == actual[j] && cost[i][j] == cost[i + 1][j + 1] {
            out += &format!("  {}\n", expected[i]);
            i += 1;
            j += 1;
        } else if j < m && (i == n || cost[i][j] == cost[i][j + 1] + 1) {
            out += &format!("+ {}\n", actual[j]);
            j += 1;
        } else {
            out += &format!("- {}\n", expected[i]);
            i += 1;
        }
    }
    out
}

/// `cargo run --release -- ARGS` as `wasmsched ARGS`; nothing else of cargo.
const PRELUDE: &str = r#"cargo() {
  if [ "$1" = run ] && [ "$2" = --release ] && [ "$3" = -- ]; then
    shift 3; wasmsched "$@"
  else
    echo "runnable docs: only 'cargo run --release -- ARGS' runs here, not: cargo $*" >&2
    return 127
  fi
}
"#;

/// Runs a block's script from the repository root: (exit status, stdout,
/// stderr).
fn run(script: &str) -> (Option<i32>, String, String) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_wasmsched"));
    let path = std::env::join_paths(std::iter::once(bin.parent().unwrap().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut cmd = Command::new("timeout");
    cmd.args(["300", "bash", "-e", "-o", "pipefail", "-c"])
        .arg(format!("{PRELUDE}{script}\n"))
        .current_dir(repo())
        .env("PATH", path)
        .stdin(Stdio::null());
    // The binary's environment variables would change what it prints.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("WASMSCHED_") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("RUST_LOG");
    let out = cmd.output().expect("running bash");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn runnable_blocks_run_and_print_what_they_show() {
    let mut failures = Vec::new();
    let (mut ran, mut compared) = (0, 0);
    for file in doc_files() {
        let rel = file.strip_prefix(repo()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let blocks = match runnables(&text) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{rel}: {e}"));
                continue;
            }
        };
        for b in blocks {
            ran += 1;
            let (status, stdout, stderr) = run(&b.script);
            let mut problems = Vec::new();
            match status {
                Some(0) => {}
                Some(124) => problems.push("timed out after 300 s (exit status 124)".into()),
                s => problems.push(format!("exit status {s:?}, not 0")),
            }
            if let Some((line, shown)) = &b.expected {
                compared += 1;
                let shown = normalize(shown);
                let printed = normalize(&stdout.lines().collect::<Vec<_>>());
                if !matches(&shown, &printed) {
                    problems.push(format!(
                        "stdout differs from the output block of line {line} \
                         (- shown, + printed; `...` stands for any lines):\n{}",
                        diff(&shown, &printed)
                    ));
                }
            }
            if !problems.is_empty() {
                failures.push(format!(
                    "{rel}:{}: the runnable block\n{}\n{}\nstderr:\n{}",
                    b.line,
                    b.script,
                    problems.join("\n"),
                    stderr.trim_end()
                ));
            }
        }
    }
    eprintln!("{ran} runnable block(s), {compared} with an output block");
    assert!(ran > 0, "no runnable block in README.md or docs/*.md");
    assert!(compared > 0, "no runnable block has an output block");
    assert!(
        failures.is_empty(),
        "{} of {ran} runnable block(s) failed:\n\n{}",
        failures.len(),
        failures.join("\n\n-----\n\n")
    );
}

// ---- the checks catch what they are for --------------------------------

fn lines(s: &str) -> Vec<String> {
    s.lines().map(str::to_string).collect()
}

#[test]
fn output_blocks_pair_with_the_runnable_block_before_them() {
    let doc = "\
```sh runnable
echo a
```

Prose.

```sh
not run
```

```text output
a
```

```sh runnable
  echo b
```
";
    let r = runnables(doc).unwrap();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].line, 1);
    assert_eq!(r[0].script, "echo a");
    assert_eq!(r[0].expected, Some((11, lines("a"))));
    assert_eq!(r[1].script, "  echo b");
    assert_eq!(r[1].expected, None);

    // Indented fences (list items) lose their indentation.
    let r = runnables("- item:\n\n  ```sh runnable\n  echo c\n  ```\n").unwrap();
    assert_eq!(r[0].script, "echo c");

    for bad in [
        "```text output\na\n```\n",
        "```sh runnable\necho\n```\n```text output\n\n```\n```text output\n\n```\n",
        "```sh runnable output\necho\n```\n",
    ] {
        assert!(runnables(bad).is_err(), "{bad}");
    }
    // A block marked neither is not run.
    assert!(runnables("```sh\nexit 1\n```\n").unwrap().is_empty());
}

#[test]
fn output_must_match_line_for_line() {
    let printed = normalize(&lines(
        "Scheduled 2 pod(s):\nPOD  NODE   \na    n1\nb    n2\n\n",
    ));
    let ok = |shown: &str| matches(&normalize(&lines(shown)), &printed);
    assert!(ok("Scheduled 2 pod(s):\nPOD  NODE\na    n1\nb    n2"));
    assert!(ok("Scheduled 2 pod(s):\n...\nb    n2"));
    assert!(ok("...\na    n1\n...\n"));
    assert!(ok(
        "...\nScheduled 2 pod(s):\nPOD  NODE\na    n1\nb    n2\n..."
    ));
    assert!(!ok("Scheduled 2 pod(s):\nPOD  NODE\na    n2\nb    n2"));
    assert!(
        !ok("Scheduled 2 pod(s):\nPOD  NODE\na    n1"),
        "a missing line"
    );
    assert!(
        !ok("Scheduled 2 pod(s):\n...\na    n1"),
        "`...` is not at the end"
    );
    assert!(
        !ok("  Scheduled 2 pod(s):\n..."),
        "leading whitespace counts"
    );
    assert!(!ok(""));
    let d = diff(&lines("a\nb\nc"), &lines("a\nx\nc"));
    assert_eq!(d, "  a\n+ x\n- b\n  c\n");
    let d = diff(&lines("...\nc\nd\n..."), &lines("a\nb\nc\nx\ny"));
    assert_eq!(d, "  ... (2 line(s))\n  c\n- d\n  ... (2 line(s))\n");
}

#[test]
fn a_failing_script_is_reported() {
    let (status, stdout, _) = run("echo one; false; echo two");
    assert_eq!(status, Some(1));
    assert_eq!(stdout, "one\n");
    let (status, _, stderr) = run("cargo build");
    assert_eq!(status, Some(127));
    assert!(
        stderr.contains("only 'cargo run --release -- ARGS'"),
        "{stderr}"
    );
    let (status, stdout, _) = run("cargo run --release -- --version");
    assert_eq!(status, Some(0));
    assert!(stdout.starts_with("wasmsched "), "{stdout}");
}
