//! The CEL environment of device selectors, as kube-scheduler evaluates
//! them (`k8s.io/dynamic-resource-allocation/cel`): the `device` variable
//! (`driver`, `attributes`, `capacity`, `allowMultipleAllocations`), where
//! an attribute domain the device does not have is an empty map and a
//! missing attribute is the error `no such key: <id>`; Kubernetes'
//! quantity and semver libraries; the CEL standard library with optional
//! syntax (`.?`, `orValue`). Expressions are compiled once (a bounded
//! cache); one that nests comprehensions four deep or more is refused as
//! over upstream's cost limit, since this interpreter does not count
//! cost.

use std::any::Any;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use cel::common::traits::{Container, Indexer};
use cel::common::types::{CelBool, CelString, Type, DYN_TYPE};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::objects::Opaque;
use cel::{Context, Env, ExecutionError, FunctionContext, Program, Value};
use parking_lot::Mutex;

use crate::model::dra::{Attr, Device, Nanos};

/// Compiled expressions kept (upstream keeps 10; any size is correct).
const CACHE_SIZE: usize = 512;

/// Comprehension macros nested this deep exceed upstream's cost limit
/// (1,000,000) on any list worth iterating.
const MAX_COMPREHENSION_DEPTH: usize = 4;

/// Upstream's cost-limit error text.
pub const COST_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// A CEL function of the environment.
type CelFn = fn(&FunctionContext) -> Result<Value, ExecutionError>;

/// A compiled selector, or why it does not compile.
pub type Compiled = Arc<Result<Program, String>>;

/// Expressions compiled so far.
#[derive(Default)]
pub struct Cache {
    programs: Mutex<HashMap<String, Compiled>>,
}

fn env() -> &'static Arc<Env> {
    static ENV: std::sync::OnceLock<Arc<Env>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib().with_optional_support(true)))
}

impl Cache {
    /// The program of `expr`, compiled on first use.
    pub fn get(&self, expr: &str) -> Compiled {
        if let Some(p) = self.programs.lock().get(expr) {
            return p.clone();
        }
        let compiled = Arc::new(compile(expr));
        let mut programs = self.programs.lock();
        if programs.len() >= CACHE_SIZE {
            programs.clear();
        }
        programs.insert(expr.to_string(), compiled.clone());
        compiled
    }
}

fn compile(expr: &str) -> Result<Program, String> {
    if expr.trim().is_empty() {
        return Err("CEL expression empty (unsupported selector type?)".into());
    }
    if comprehension_depth(expr) >= MAX_COMPREHENSION_DEPTH {
        return Err(format!("compilation failed: {COST_EXCEEDED}"));
    }
    env()
        .compile(expr)
        .map_err(|e| format!("compilation failed: {e}"))
}

/// How deep comprehension macros (`all`, `exists`, `exists_one`, `map`,
/// `filter`) nest in `expr`, by their parentheses.
fn comprehension_depth(expr: &str) -> usize {
    const MACROS: [&str; 5] = [".all(", ".exists(", ".exists_one(", ".map(", ".filter("];
    let bytes = expr.as_bytes();
    // The paren depth at which each open comprehension started.
    let mut open: Vec<usize> = Vec::new();
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' | b'\'' => quote = Some(c),
            b'(' => {
                if MACROS.iter().any(|m| expr[..=i].ends_with(m)) {
                    open.push(depth);
                    max = max.max(open.len());
                }
                depth += 1;
            }
            b')' => {
                depth = depth.saturating_sub(1);
                if open.last() == Some(&depth) {
                    open.pop();
                }
            }
            _ => {}
        }
        i += 1;
    }
    max
}

/// Runs a compiled selector on a device; `Ok(false)` when it does not
/// match, `Err` with the runtime error's text (upstream's wording where it
/// has one).
pub fn matches(program: &Program, device: &DeviceVal) -> Result<bool, String> {
    ROOT.with(|root| {
        let mut ctx = root.new_inner_scope();
        ctx.add_variable_as_val("device", Box::new(device.clone()));
        match program.execute(&ctx) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "CEL result of type {} could not be converted to bool",
                other.type_of()
            )),
            Err(e) => Err(runtime_error(&e)),
        }
    })
}

/// Upstream's messages for the errors users see most, and its hint.
fn runtime_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!(
            "no such key: {k}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"
        ),
        other => other.to_string(),
    }
}

thread_local! {
    /// The functions every evaluation can call (built once per thread).
    static ROOT: Context<'static, 'static> = root();
}

fn root() -> Context<'static, 'static> {
    let mut ctx = Context::with_env(env().clone());
    let functions: [(&str, CelFn); 17] = [
        ("quantity", f_quantity),
        ("isQuantity", f_is_quantity),
        ("semver", f_semver),
        ("isSemver", f_is_semver),
        ("compareTo", f_compare_to),
        ("isGreaterThan", f_is_greater_than),
        ("isLessThan", f_is_less_than),
        ("asInteger", f_as_integer),
        ("isInteger", f_is_integer),
        ("asApproximateFloat", f_as_float),
        ("add", f_add),
        ("sub", f_sub),
        ("sign", f_sign),
        ("major", f_major),
        ("minor", f_minor),
        ("patch", f_patch),
        ("compare", f_compare_to),
    ];
    for (name, f) in functions {
        // The names are fixed and distinct: registration cannot fail.
        let _ = ctx.add_function(name, f);
    }
    ctx
}

/// A Kubernetes quantity in CEL (`quantity("40Gi")`, a device capacity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity(pub Nanos);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version in CEL (`semver("1.2.3")`, a `version` attribute).
/// Equal and ordered by SemVer 2.0 precedence (build metadata ignored).
#[derive(Debug, Clone)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pre: Vec<String>,
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp_precedence(other) == Ordering::Equal
    }
}

impl Eq for Semver {}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    /// Strict SemVer 2.0; with `normalize`, a leading `v`, missing minor
    /// or patch and leading zeros are accepted first.
    pub fn parse(s: &str, normalize: bool) -> Result<Self, String> {
        let mut text = s.to_string();
        if normalize {
            text = normalized(&text);
        }
        let (core, _build) = text.split_once('+').unwrap_or((&text, ""));
        let (core, pre) = match core.split_once('-') {
            Some((c, p)) => (c, p.split('.').map(str::to_string).collect()),
            None => (core, Vec::new()),
        };
        let parts: Vec<&str> = core.split('.').collect();
        let [ma, mi, pa] = parts.as_slice() else {
            return Err(format!("invalid semver {s:?}: expected MAJOR.MINOR.PATCH"));
        };
        let num = |p: &str| -> Result<u64, String> {
            if p.is_empty() || (p.len() > 1 && p.starts_with('0')) {
                return Err(format!("invalid semver {s:?}: bad number {p:?}"));
            }
            p.parse()
                .map_err(|_| format!("invalid semver {s:?}: bad number {p:?}"))
        };
        let pre: Vec<String> = pre;
        if pre.iter().any(|p| p.is_empty()) {
            return Err(format!(
                "invalid semver {s:?}: empty pre-release identifier"
            ));
        }
        Ok(Self {
            major: num(ma)?,
            minor: num(mi)?,
            patch: num(pa)?,
            pre,
        })
    }

    fn cmp_precedence(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let o = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(x), Ok(y)) => x.cmp(&y),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            (Err(_), Err(_)) => a.cmp(b),
                        };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

/// blang/semver's normalization: no leading `v`, missing minor/patch as 0,
/// no leading zeros.
fn normalized(s: &str) -> String {
    let s = s.strip_prefix('v').unwrap_or(s);
    let (core, rest) = match s.find(['-', '+']) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let mut parts: Vec<String> = core
        .split('.')
        .map(|p| {
            let t = p.trim_start_matches('0');
            if t.is_empty() {
                "0".into()
            } else {
                t.to_string()
            }
        })
        .collect();
    while parts.len() < 3 {
        parts.push("0".into());
    }
    format!("{}{rest}", parts.join("."))
}

// --- the device variable -----------------------------------------------

/// `device.attributes` or `device.capacity`: maps by domain; a domain the
/// device does not have is an empty map, and is not `in` it.
#[derive(Debug)]
struct Domains {
    maps: HashMap<String, Box<dyn Val>>,
    empty: Box<dyn Val>,
}

impl Domains {
    fn new(maps: HashMap<String, HashMap<String, Value>>) -> Self {
        let to_val = |v: Value| Box::<dyn Val>::try_from(v).ok();
        Self {
            maps: maps
                .into_iter()
                .filter_map(|(k, m)| Some((k, to_val(Value::Map(m.into()))?)))
                .collect(),
            empty: to_val(Value::Map(HashMap::<String, Value>::new().into()))
                .unwrap_or_else(|| Box::new(CelBool::from(false))),
        }
    }
}

impl Clone for Domains {
    fn clone(&self) -> Self {
        Self {
            maps: self
                .maps
                .iter()
                .map(|(k, v)| (k.clone(), v.clone_as_boxed()))
                .collect(),
            empty: self.empty.clone_as_boxed(),
        }
    }
}

fn key(idx: &dyn Val) -> Result<String, ExecutionError> {
    idx.downcast_ref::<CelString>()
        .map(|s| s.inner().to_string())
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: format!("{:?}", idx.get_type()),
            want: "string".into(),
        })
}

impl Val for Domains {
    fn get_type(&self) -> &Type {
        &DYN_TYPE
    }
    fn cel_type() -> &'static Type {
        &DYN_TYPE
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn as_container(&self) -> Option<&dyn Container> {
        Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for Domains {}

impl Indexer for Domains {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let k = key(idx)?;
        let map = self.maps.get(&k).unwrap_or(&self.empty);
        Ok(CowVal::Borrowed(map.as_ref()))
    }
    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Container for Domains {
    fn contains(&self, value: &dyn Val) -> Result<bool, ExecutionError> {
        Ok(self.maps.contains_key(&key(value)?))
    }
}

/// What `device` is in a selector: built once per device (when its slice
/// arrives) and shared by every evaluation.
#[derive(Debug, Clone)]
pub struct DeviceVal(Arc<DeviceData>);

#[derive(Debug)]
struct DeviceData {
    driver: String,
    allow_multiple: bool,
    attributes: Domains,
    capacity: Domains,
    /// A version attribute that is not SemVer: every evaluation on the
    /// device fails with this (as upstream's conversion does).
    bad_version: Option<String>,
}

impl DeviceVal {
    pub fn new(device: &Device, driver: &str) -> Self {
        let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
        let mut bad_version = None;
        for (name, a) in &device.attributes {
            let (domain, id) = name.split_once('/').unwrap_or((driver, name));
            let v = match a {
                Attr::Int(i) => Value::Int(*i),
                Attr::Bool(b) => Value::Bool(*b),
                Attr::Str(s) => Value::String(Arc::new(s.clone())),
                Attr::Version(v) => match Semver::parse(v, false) {
                    Ok(sv) => Value::Opaque(Arc::new(sv)),
                    Err(e) => {
                        bad_version.get_or_insert_with(|| {
                            format!("attribute {name}: parse semantic version: {e}")
                        });
                        continue;
                    }
                },
            };
            attributes
                .entry(domain.to_string())
                .or_default()
                .insert(id.to_string(), v);
        }
        let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
        for (name, q) in &device.capacity {
            let (domain, id) = name.split_once('/').unwrap_or((driver, name));
            capacity
                .entry(domain.to_string())
                .or_default()
                .insert(id.to_string(), Value::Opaque(Arc::new(Quantity(*q))));
        }
        Self(Arc::new(DeviceData {
            driver: driver.to_string(),
            allow_multiple: device.allow_multiple,
            attributes: Domains::new(attributes),
            capacity: Domains::new(capacity),
            bad_version,
        }))
    }

    /// Why every evaluation on this device fails, if one does.
    pub fn invalid(&self) -> Option<&str> {
        self.0.bad_version.as_deref()
    }
}

impl Val for DeviceVal {
    fn get_type(&self) -> &Type {
        &DYN_TYPE
    }
    fn cel_type() -> &'static Type {
        &DYN_TYPE
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}

impl StaticVal for DeviceVal {}

impl Indexer for DeviceVal {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match key(idx)?.as_str() {
            "driver" => Ok(CowVal::owned(CelString::from(self.0.driver.clone()))),
            "allowMultipleAllocations" => Ok(CowVal::owned(CelBool::from(self.0.allow_multiple))),
            "attributes" => Ok(CowVal::Borrowed(&self.0.attributes)),
            "capacity" => Ok(CowVal::Borrowed(&self.0.capacity)),
            other => Err(ExecutionError::NoSuchKey(Arc::new(other.to_string()))),
        }
    }
    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

// --- the Kubernetes libraries --------------------------------------------

fn opaque<T: Clone + 'static>(v: &dyn Val) -> Option<T> {
    match Value::try_from(v) {
        Ok(Value::Opaque(o)) => o.downcast_ref::<T>().cloned(),
        _ => None,
    }
}

fn arg<'a>(ftx: &'a FunctionContext, i: usize) -> Result<&'a dyn Val, ExecutionError> {
    ftx.args
        .get(i)
        .map(|a| &**a)
        .ok_or(ExecutionError::MissingArgumentOrTarget)
}

fn this<'a>(ftx: &'a FunctionContext) -> Result<&'a dyn Val, ExecutionError> {
    ftx.this
        .as_deref()
        .ok_or(ExecutionError::MissingArgumentOrTarget)
}

fn string_arg(ftx: &FunctionContext, i: usize) -> Result<String, ExecutionError> {
    key(arg(ftx, i)?)
}

fn opaque_value<T: Opaque + 'static>(v: T) -> Value {
    Value::Opaque(Arc::new(v))
}

fn f_quantity(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let s = string_arg(ftx, 0)?;
    let q = crate::model::dra::nanos(&s).map_err(|e| ftx.error(e))?;
    Ok(opaque_value(Quantity(q)))
}

fn f_is_quantity(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        crate::model::dra::nanos(&string_arg(ftx, 0)?).is_ok(),
    ))
}

fn normalize_flag(ftx: &FunctionContext) -> bool {
    ftx.args
        .get(1)
        .and_then(|a| a.downcast_ref::<CelBool>())
        .is_some_and(|b| *b.inner())
}

fn f_semver(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let s = string_arg(ftx, 0)?;
    Semver::parse(&s, normalize_flag(ftx))
        .map(opaque_value)
        .map_err(|e| ftx.error(e))
}

fn f_is_semver(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let s = string_arg(ftx, 0)?;
    Ok(Value::Bool(Semver::parse(&s, normalize_flag(ftx)).is_ok()))
}

/// The order of `this` against the argument (both quantities or both
/// versions).
fn order(ftx: &FunctionContext) -> Result<Ordering, ExecutionError> {
    let (a, b) = (this(ftx)?, arg(ftx, 0)?);
    if let (Some(x), Some(y)) = (opaque::<Quantity>(a), opaque::<Quantity>(b)) {
        return Ok(x.0.cmp(&y.0));
    }
    if let (Some(x), Some(y)) = (opaque::<Semver>(a), opaque::<Semver>(b)) {
        return Ok(x.cmp_precedence(&y));
    }
    Err(ftx.error(format!("no such overload: {}", ftx.name)))
}

fn f_compare_to(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Int(order(ftx)? as i64))
}

fn f_is_greater_than(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(order(ftx)? == Ordering::Greater))
}

fn f_is_less_than(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(order(ftx)? == Ordering::Less))
}

const NANO: i128 = 1_000_000_000;

fn quantity_this(ftx: &FunctionContext) -> Result<Nanos, ExecutionError> {
    this(ftx)
        .ok()
        .and_then(opaque::<Quantity>)
        .or_else(|| arg(ftx, 0).ok().and_then(opaque::<Quantity>))
        .map(|q| q.0)
        .ok_or_else(|| ftx.error(format!("no such overload: {}", ftx.name)))
}

fn f_as_integer(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let q = quantity_this(ftx)?;
    if q % NANO != 0 {
        return Err(ftx.error("cannot convert value to integer"));
    }
    i64::try_from(q / NANO)
        .map(Value::Int)
        .map_err(|_| ftx.error("cannot convert value to integer"))
}

fn f_is_integer(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let q = quantity_this(ftx)?;
    Ok(Value::Bool(
        q % NANO == 0 && i64::try_from(q / NANO).is_ok(),
    ))
}

fn f_as_float(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Float(quantity_this(ftx)? as f64 / NANO as f64))
}

fn f_sign(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Int(quantity_this(ftx)?.signum() as i64))
}

/// The argument of `add`/`sub`: a quantity or an integer.
fn operand(ftx: &FunctionContext) -> Result<Nanos, ExecutionError> {
    let a = arg(ftx, 0)?;
    if let Some(q) = opaque::<Quantity>(a) {
        return Ok(q.0);
    }
    match Value::try_from(a) {
        Ok(Value::Int(i)) => Ok(i128::from(i) * NANO),
        _ => Err(ftx.error(format!("no such overload: {}", ftx.name))),
    }
}

fn f_add(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let q = quantity_this(ftx)?;
    let sum = q
        .checked_add(operand(ftx)?)
        .ok_or_else(|| ftx.error("quantity overflow"))?;
    Ok(opaque_value(Quantity(sum)))
}

fn f_sub(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    let q = quantity_this(ftx)?;
    let diff = q
        .checked_sub(operand(ftx)?)
        .ok_or_else(|| ftx.error("quantity overflow"))?;
    Ok(opaque_value(Quantity(diff)))
}

fn semver_this(ftx: &FunctionContext) -> Result<Semver, ExecutionError> {
    this(ftx)
        .ok()
        .and_then(opaque::<Semver>)
        .ok_or_else(|| ftx.error(format!("no such overload: {}", ftx.name)))
}

fn f_major(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Int(semver_this(ftx)?.major as i64))
}

fn f_minor(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Int(semver_this(ftx)?.minor as i64))
}

fn f_patch(ftx: &FunctionContext) -> Result<Value, ExecutionError> {
    Ok(Value::Int(semver_this(ftx)?.patch as i64))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn device(attrs: &[(&str, Attr)], caps: &[(&str, &str)]) -> DeviceVal {
        let d = Device {
            name: "gpu-0".into(),
            attributes: attrs
                .iter()
                .map(|(k, v)| {
                    (
                        crate::model::dra::qualified(k, "gpu.example.com"),
                        v.clone(),
                    )
                })
                .collect(),
            capacity: caps
                .iter()
                .map(|(k, v)| {
                    (
                        crate::model::dra::qualified(k, "gpu.example.com"),
                        crate::model::dra::nanos(v).unwrap(),
                    )
                })
                .collect::<BTreeMap<_, _>>(),
            consumes: Vec::new(),
            taints: Vec::new(),
            scope: None,
            binding_conditions: Vec::new(),
            binding_failure_conditions: Vec::new(),
            allow_multiple: false,
            capacities: Vec::new(),
            binds_to_node: false,
        };
        DeviceVal::new(&d, "gpu.example.com")
    }

    fn eval(expr: &str, d: &DeviceVal) -> Result<bool, String> {
        let cache = Cache::default();
        match &*cache.get(expr) {
            Ok(p) => matches(p, d),
            Err(e) => Err(e.clone()),
        }
    }

    #[test]
    fn attributes_capacity_and_the_kubernetes_libraries() {
        let d = device(
            &[
                ("model", Attr::Str("A100".into())),
                ("index", Attr::Int(3)),
                ("driverVersion", Attr::Version("1.2.3".into())),
                ("other.example.com/flag", Attr::Bool(true)),
            ],
            &[("memory", "40Gi")],
        );
        for (expr, want) in [
            (r#"device.driver == "gpu.example.com""#, true),
            (
                r#"device.attributes["gpu.example.com"].model == "A100""#,
                true,
            ),
            (r#"device.attributes["gpu.example.com"].index > 2"#, true),
            (r#"device.attributes["other.example.com"].flag"#, true),
            (
                r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
                true,
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("41Gi"))"#,
                false,
            ),
            (
                r#"device.capacity["gpu.example.com"].memory == quantity("40960Mi")"#,
                true,
            ),
            (
                r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.0.0"))"#,
                true,
            ),
            (
                r#"device.attributes["gpu.example.com"].driverVersion == semver("v1.2.3", true)"#,
                true,
            ),
            (
                r#"device.attributes["gpu.example.com"].driverVersion.major() == 1"#,
                true,
            ),
            // A domain the device does not have is an empty map.
            (r#"device.attributes["nvidia.com"].size() == 0"#, true),
            (r#""nvidia.com" in device.attributes"#, false),
            (r#""gpu.example.com" in device.attributes"#, true),
            (
                r#"has(device.attributes["gpu.example.com"].healthy)"#,
                false,
            ),
            (
                r#"device.attributes["gpu.example.com"].?healthy.orValue(true)"#,
                true,
            ),
            (r#"device.allowMultipleAllocations"#, false),
        ] {
            assert_eq!(eval(expr, &d), Ok(want), "{expr}");
        }
    }

    #[test]
    fn upstreams_errors() {
        let d = device(&[("model", Attr::Str("A100".into()))], &[]);
        assert_eq!(
            eval(r#"device.attributes["gpu.example.com"].healthy"#, &d),
            Err("no such key: healthy. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields".into())
        );
        assert!(eval(r#"device.attributes["gpu.example.com"].model"#, &d)
            .unwrap_err()
            .contains("could not be converted to bool"));
        assert!(eval("", &d).unwrap_err().contains("CEL expression empty"));
        assert!(eval("device.driver ==", &d)
            .unwrap_err()
            .starts_with("compilation failed"));
        let nested = "[1,2].all(a, [1,2].all(b, [1,2].all(c, [1,2].all(d, true))))";
        assert_eq!(
            eval(nested, &d),
            Err(format!("compilation failed: {COST_EXCEEDED}"))
        );
        assert_eq!(eval("[1,2].all(a, [1,2].all(b, true))", &d), Ok(true));
        let bad = device(&[("v", Attr::Version("1.2".into()))], &[]);
        assert!(bad.invalid().unwrap().contains("parse semantic version"));
    }

    #[test]
    fn semver_precedence() {
        let v = |s| Semver::parse(s, false).unwrap();
        assert!(v("1.0.0-alpha").cmp_precedence(&v("1.0.0")) == Ordering::Less);
        assert!(v("1.0.0-alpha.1").cmp_precedence(&v("1.0.0-alpha.beta")) == Ordering::Less);
        assert!(v("1.0.0-2").cmp_precedence(&v("1.0.0-11")) == Ordering::Less);
        assert_eq!(v("1.0.0+build.1"), v("1.0.0+other"));
        assert!(Semver::parse("1.2", false).is_err());
        assert_eq!(Semver::parse("v1.2", true).unwrap(), v("1.2.0"));
        assert!(Semver::parse("01.2.3", false).is_err());
    }
}
