//! YAML (and so JSON) parsed within [`Limits`]: nesting depth, alias
//! uses and alias expansion are capped while parsing, so an alias bomb or
//! a 100,000-deep nesting is refused at once. Errors are one line and end
//! with the position, `at line L column C`.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{Error, Location, Options};

use super::bounded::{with_limit, Bounded};
use super::Limits;
use crate::model::validation::quote;

/// Parser options for input that may be hostile.
pub fn options(limits: &Limits) -> Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: limits.depth,
            flow_nesting_limit: limits.depth,
            max_aliases: limits.aliases,
            // The bytes read are capped before parsing: these follow from
            // that cap, and an alias cannot add events.
            max_events: usize::MAX,
            max_nodes: usize::MAX,
            max_documents: usize::MAX,
            max_total_scalar_bytes: usize::MAX,
            max_anchors: usize::MAX,
            max_reader_input_bytes: None,
            // Many uses of one anchor are legitimate; the expansion cap
            // below is what bounds them.
            enforce_alias_anchor_ratio: false,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: limits.alias_expansion,
        },
        // YAML 1.2, as before: `yes`, `on` are strings.
        strict_booleans: true,
        with_snippet: false,
    }
}

/// A position suffix without a comma, as the messages have always had.
struct Position;

impl serde_saphyr::Localizer for Position {
    fn attach_location<'a>(&self, base: Cow<'a, str>, loc: Location) -> Cow<'a, str> {
        if loc == Location::UNKNOWN {
            base
        } else {
            Cow::Owned(format!(
                "{base} at line {} column {}",
                loc.line(),
                loc.column()
            ))
        }
    }
}

fn position(base: String, loc: Option<Location>) -> String {
    match loc.filter(|l| *l != Location::UNKNOWN) {
        Some(l) => format!("{base} at line {} column {}", l.line(), l.column()),
        None => base,
    }
}

/// Serde's wording for a list of expected names (`` `a` or `b` ``).
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.as_slice() {
        [] => "no fields".into(),
        [a] => a.clone(),
        [a, b] => format!("{a} or {b}"),
        all => format!("one of {}", all.join(", ")),
    }
}

/// What a Rust scalar type means to someone writing YAML.
fn type_words(ty: &str) -> &str {
    match ty {
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" => "a non-negative integer",
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "bool" => "true or false",
        "char" => "a single character",
        other => other,
    }
}

/// The scalar written at `loc` in `text`, for an error that does not
/// quote it: up to a comment, a flow separator or the end of the line.
fn scalar_at(text: &str, loc: Location) -> Option<String> {
    let line = text.lines().nth(usize::try_from(loc.line()).ok()?.checked_sub(1)?)?;
    let skip = usize::try_from(loc.column()).ok()?.checked_sub(1)?;
    let rest: String = line.chars().skip(skip).collect();
    let end = [" #", ",", "]", "}"]
        .iter()
        .filter_map(|m| rest.find(m))
        .min()
        .unwrap_or(rest.len());
    let s = rest[..end].trim();
    let s = s
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(s);
    (!s.is_empty()).then(|| s.to_string())
}

/// One line saying what is wrong and where, naming the cap a breach
/// crossed.
fn message(e: &Error, text: &str, limits: &Limits) -> String {
    let e = e.without_snippet();
    let base = match e {
        Error::Budget { breach, .. } => match breach {
            BudgetBreach::Depth { .. } => {
                format!("nested deeper than the limit of {} levels", limits.depth)
            }
            BudgetBreach::Aliases { .. } => {
                format!("more than the limit of {} alias uses", limits.aliases)
            }
            other => format!("over a parsing limit ({other:?})"),
        },
        Error::AliasReplayLimitExceeded { .. } | Error::AliasExpansionLimitExceeded { .. } => {
            format!(
                "aliases expand past the limit of {} YAML nodes",
                limits.alias_expansion
            )
        }
        Error::AliasReplayStackDepthExceeded { .. } => {
            format!("aliases nest deeper than the limit of {} levels", limits.depth)
        }
        Error::SerdeUnknownField {
            field, expected, ..
        } => format!("unknown field `{field}`, expected {}", one_of(expected)),
        Error::InvalidScalar { ty, location } => {
            let value = scalar_at(text, *location);
            format!(
                "invalid value{}, expected {}",
                value.map(|v| format!(" {}", quote(&v))).unwrap_or_default(),
                type_words(ty)
            )
        }
        other => {
            let formatter = serde_saphyr::DefaultMessageFormatter.with_localizer(&Position);
            return other.render_with_options(serde_saphyr::render_options! {
                formatter: &formatter,
                snippets: serde_saphyr::SnippetMode::Off,
            });
        }
    };
    position(base, e.location())
}

/// An error in a typed document: the field path (`.` for the document
/// itself) and the cause with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedError {
    pub path: String,
    pub cause: String,
}

/// Parses one document as `T`, naming the field at fault.
pub fn typed<T: DeserializeOwned>(text: &str, limits: &Limits) -> Result<T, TypedError> {
    // Parsed once as a value first: that counts what aliases expand to,
    // which the typed parse cannot.
    with_limit(limits.file_bytes, || {
        serde_saphyr::from_str_with_options::<Option<Bounded>>(text, options(limits))
    })
    .map_err(|e| TypedError {
        path: ".".into(),
        cause: message(&e, text, limits),
    })?;
    let mut path = String::from(".");
    serde_saphyr::with_deserializer_from_str_with_options(text, options(limits), |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = e.path().to_string();
            e.into_inner()
        })
    })
    .map_err(|e| TypedError {
        cause: message(&e, text, limits),
        path,
    })
}

/// Where each document of a stream starts, to number documents as
/// `---` separators do (empty documents count, though they yield no
/// value). A line that begins with `---` or `...` is a marker wherever it
/// is: YAML forbids such a line inside any scalar.
struct DocumentStarts(Vec<u64>);

impl DocumentStarts {
    fn of(text: &str) -> Self {
        let mut starts = Vec::new();
        let mut open = false;
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_start_matches('\u{feff}');
            let marker = |m: &str| {
                line.strip_prefix(m)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
            };
            if marker("---") {
                starts.push(i as u64 + 1);
                open = true;
            } else if marker("...") {
                open = false;
            } else if !open && !line.trim().is_empty() && !line.starts_with(['#', '%']) {
                starts.push(i as u64 + 1);
                open = true;
            }
        }
        Self(starts)
    }

    /// The number (from 1) of the document holding `line`.
    fn number(&self, line: u64) -> usize {
        self.0.partition_point(|s| *s <= line).max(1)
    }
}

/// Every non-empty document of a stream, numbered from 1 as `---`
/// separators count them. On error: the document's number and the
/// cause.
pub fn documents(text: &str, limits: &Limits) -> Result<Vec<(usize, Value)>, (usize, String)> {
    let starts = DocumentStarts::of(text);
    let docs: Vec<serde_saphyr::Spanned<Bounded>> = with_limit(limits.file_bytes, || {
        serde_saphyr::from_multiple_with_options(text, options(limits))
    })
    .map_err(|e| {
        let line = e.location().map_or(0, |l| l.line());
        (starts.number(line), message(&e, text, limits))
    })?;
    Ok(docs
        .into_iter()
        .map(|d| (starts.number(d.referenced.line()), d.value.0))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_numbered_as_separators_count_them() {
        let text = "# head\n---\n---\n# only a comment\n---\nkind: A\n...\nkind: B\n--- {kind: C}\n";
        let docs = documents(text, &Limits::DEFAULT).unwrap();
        let numbers: Vec<(usize, &str)> = docs
            .iter()
            .map(|(n, v)| (*n, v["kind"].as_str().unwrap()))
            .collect();
        assert_eq!(numbers, [(3, "A"), (4, "B"), (5, "C")]);
        let bare = documents("kind: A\n---\nkind: B\n", &Limits::DEFAULT).unwrap();
        assert_eq!(bare[1].0, 2);
    }

    #[test]
    fn errors_name_the_document_and_position() {
        let (doc, msg) = documents("a: 1\n---\nb: [1,\n", &Limits::DEFAULT).unwrap_err();
        assert_eq!(doc, 2, "{msg}");
        assert!(msg.contains(" at line "), "{msg}");
    }

    #[test]
    fn yes_and_on_stay_strings() {
        let docs = documents("a: yes\nb: on\nc: true\n", &Limits::DEFAULT).unwrap();
        assert_eq!(docs[0].1, serde_json::json!({"a": "yes", "b": "on", "c": true}));
    }
}
