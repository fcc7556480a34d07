//! YAML (and so JSON) parsed within [`Limits`]: nesting depth, alias
//! uses and alias expansion are capped while parsing, so an alias bomb or
//! a 100,000-deep nesting is refused at once. Errors are one line and end
//! with the position, `at line L column C`.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::granit_parser::ErrorKind;
use serde_saphyr::{Error, ExternalMessageSource, Location, Options};

use super::bounded::{with_limit, Bounded, EXPANDS_PAST};
use super::Limits;
use crate::model::validation::quote;

/// Parser options for input that may be hostile.
pub fn options(limits: &Limits) -> Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: limits.depth,
            // Past the depth budget, so that the budget names the cap.
            flow_nesting_limit: limits.depth.saturating_add(1),
            max_aliases: limits.aliases,
            // The bytes read are capped before parsing: these follow from
            // that cap, and an alias cannot add events.
            max_events: usize::MAX,
            max_nodes: usize::MAX,
            max_documents: usize::MAX,
            max_total_scalar_bytes: usize::MAX,
            max_anchors: usize::MAX,
            // What anchors hold, copied for later aliases, counts as
            // expansion too (an anchor can hold aliases).
            max_recorded_anchor_events: limits.alias_expansion,
            max_recorded_anchor_bytes: usize::try_from(limits.file_bytes).unwrap_or(usize::MAX),
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
        // As before: `name:` into a string field is "" (then checked as
        // any empty value), not a type error.
        null_as_string: true,
        with_snippet: false,
    }
}

/// A position suffix without a comma, as the messages have always had.
struct Position;

impl serde_saphyr::Localizer for Position {
    fn attach_location<'a>(&self, base: Cow<'a, str>, loc: Location) -> Cow<'a, str> {
        Cow::Owned(position(base.into_owned(), Some(loc)))
    }

    fn alias_defined_at(&self, defined: Location) -> String {
        position(" (the anchor is".into(), Some(defined)) + ")"
    }

    fn alias_used_at(&self, used: Location) -> String {
        position(" (the alias is".into(), Some(used)) + ")"
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
    let line = text
        .lines()
        .nth(usize::try_from(loc.line()).ok()?.checked_sub(1)?)?;
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

/// The error under alias and snippet wrappers.
fn original(e: &Error) -> &Error {
    match e.without_snippet() {
        Error::AliasError { error, .. } => original(error),
        other => other,
    }
}

/// What a cap says when the parser crossed it.
fn over_limit(e: &Error, limits: &Limits) -> Option<String> {
    Some(match original(e) {
        Error::Budget {
            breach: BudgetBreach::Depth { .. },
            ..
        } => format!("nested deeper than the limit of {} levels", limits.depth),
        Error::ExternalMessage { source, .. }
            if matches!(&**source, ExternalMessageSource::Parser(e)
                if matches!(e.kind(), ErrorKind::RecursionLimitExceeded)) =>
        {
            // The scanner counts nesting before the budget sees it.
            format!("nested deeper than the limit of {} levels", limits.depth)
        }
        Error::Budget {
            breach: BudgetBreach::Aliases { .. },
            ..
        } => format!("more than the limit of {} alias uses", limits.aliases),
        Error::Budget {
            breach: BudgetBreach::RecordedAnchorBytes { .. },
            ..
        } => format!(
            "anchors hold more than the limit of {} on one file",
            super::bytes(limits.file_bytes)
        ),
        Error::AliasReplayLimitExceeded { .. }
        | Error::AliasExpansionLimitExceeded { .. }
        | Error::Budget {
            breach: BudgetBreach::RecordedAnchorEvents { .. },
            ..
        } => {
            format!(
                "aliases expand past the limit of {} YAML nodes",
                limits.alias_expansion
            )
        }
        Error::AliasReplayStackDepthExceeded { .. } => {
            format!(
                "aliases nest deeper than the limit of {} levels",
                limits.depth
            )
        }
        Error::Budget { breach, .. } => format!("over a parsing limit ({breach:?})"),
        _ => return None,
    })
}

/// Why a text could not be used, in one line ending with the position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub message: String,
    /// A cap was crossed (the text may be valid YAML).
    pub limit: bool,
}

fn message(e: &Error, text: &str, limits: &Limits) -> Cause {
    let e = e.without_snippet();
    if let Some(base) = over_limit(e, limits) {
        return Cause {
            message: position(base, e.location()),
            limit: true,
        };
    }
    let base = match e {
        Error::SerdeUnknownField {
            field, expected, ..
        } => format!(
            "unknown field `{}`, expected {}",
            crate::escape::name(field),
            one_of(expected)
        ),
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
            let message = other.render_with_options(serde_saphyr::render_options! {
                formatter: &formatter,
                snippets: serde_saphyr::SnippetMode::Off,
            });
            let limit = matches!(original(other), Error::Message { msg, .. } if msg.starts_with(EXPANDS_PAST));
            return Cause { message, limit };
        }
    };
    Cause {
        message: position(base, e.location()),
        limit: false,
    }
}

/// An error in a typed document: the field path (`.` for the document
/// itself) and the cause with its position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedError {
    pub path: String,
    pub cause: String,
}

/// Stack for a parse: nesting to the depth limit takes several MiB in a
/// debug build, more than a test's or a tokio worker's thread has.
const PARSE_STACK: usize = 64 << 20;

/// Runs `f` on a thread with [`PARSE_STACK`] (on this one if no thread
/// can be started).
fn on_parse_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let slot = std::sync::Mutex::new(Some(f));
    let run = || {
        let f = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        f.map(|f| f())
    };
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("yaml".into())
            .stack_size(PARSE_STACK)
            .spawn_scoped(scope, run)
        {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            Err(_) => run(),
        }
    })
    .expect("the parse runs once")
}

/// Parses one document as `T`, naming the field at fault.
pub fn typed<T: DeserializeOwned + Send>(text: &str, limits: &Limits) -> Result<T, TypedError> {
    on_parse_stack(|| {
        // Parsed once as a value first: that counts what aliases expand
        // to, which the typed parse cannot.
        with_limit(limits.file_bytes, || {
            serde_saphyr::from_str_with_options::<Option<Bounded>>(text, options(limits))
        })
        .map_err(|e| TypedError {
            path: ".".into(),
            cause: message(&e, text, limits).message,
        })?;
        let mut path = String::from(".");
        serde_saphyr::with_deserializer_from_str_with_options(text, options(limits), |de| {
            serde_path_to_error::deserialize(de).map_err(|e| {
                path = crate::escape::escape(&e.path().to_string()).into_owned();
                e.into_inner()
            })
        })
        .map_err(|e| TypedError {
            cause: message(&e, text, limits).message,
            path,
        })
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
            } else if !open
                && !line.trim().is_empty()
                && !line.trim_start().starts_with('#')
                && !line.starts_with('%')
            {
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
pub fn documents(text: &str, limits: &Limits) -> Result<Vec<(usize, Value)>, (usize, Cause)> {
    let starts = DocumentStarts::of(text);
    let docs: Vec<serde_saphyr::Spanned<Bounded>> = on_parse_stack(|| {
        with_limit(limits.file_bytes, || {
            serde_saphyr::from_multiple_with_options(text, options(limits))
        })
        .map_err(|e| {
            let line = e.location().map_or(0, |l| l.line());
            (starts.number(line), message(&e, text, limits))
        })
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
        let text =
            "  # head\n---\n---\n# only a comment\n---\nkind: A\n...\nkind: B\n--- {kind: C}\n";
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
        let (doc, cause) = documents("a: 1\n---\nb: [1,\n", &Limits::DEFAULT).unwrap_err();
        assert_eq!(doc, 2, "{cause:?}");
        assert!(cause.message.contains(" at line 3 column "), "{cause:?}");
        assert!(!cause.limit);
    }

    #[test]
    fn an_empty_string_field_is_empty() {
        let file: crate::config::ConfigFile =
            typed("profiles:\n- schedulerName:\n", &Limits::DEFAULT).unwrap();
        assert_eq!(file.profiles[0].scheduler_name, "");
    }

    #[test]
    fn yes_and_on_stay_strings() {
        let docs = documents("a: yes\nb: on\nc: true\n", &Limits::DEFAULT).unwrap();
        assert_eq!(
            docs[0].1,
            serde_json::json!({"a": "yes", "b": "on", "c": true})
        );
    }
}
