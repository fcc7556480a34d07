//! The structured allocator of kube-scheduler 1.37
//! (`k8s.io/dynamic-resource-allocation/structured`, the "incubating"
//! variant its default features select): for one node, the first devices
//! that satisfy every unallocated claim of a pod, found by a depth-first
//! search over pools sorted by driver and name, slices sorted by name and
//! devices in slice order (combinations, never permutations), claims in
//! the pod's order, requests in the claim's, subrequests of a prioritized
//! list in theirs. Devices allocated to other claims (or in flight to
//! them) are skipped; shared counters of partitionable devices, device
//! taints, `matchAttribute` / `distinctAttribute` constraints and admin
//! access are honoured. What differs from upstream is listed in
//! docs/dra.md.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use serde_json::{json, Value};

use super::capacity::{self, Consumed, SharedUse};
use super::cel::{self, Compiled, DeviceVal};
use crate::framework::{DeviceSet, RankDevice, RankInput};
use crate::model::dra::{
    Attr, Claim, Class, Constraint, Device, Exact, Mode, NodeScope, Request, Slice, MAX_RESULTS,
    MAX_SUBREQUESTS,
};
use crate::model::dra::{CounterSet, Nanos};
use crate::model::Node;

/// A slice with what evaluating its devices needs, built once per slice.
#[derive(Debug)]
pub struct SliceData {
    pub slice: Slice,
    /// `device` of each device, for CEL.
    pub cel: Vec<DeviceVal>,
    /// Each device as device rankers see it, and its id.
    pub ranked: Vec<(DeviceId, RankDevice)>,
    /// Unique to this slice data, of all built in the process: the slices'
    /// serials name a node's device list ([`RankInput::devices_key`]).
    pub serial: u64,
    /// Selectors' verdicts on each device, kept for the slice's life: a
    /// selector reads only `device`, so every pod and node after the first
    /// reuses them (upstream evaluates again for each).
    verdicts: Mutex<Verdicts>,
}

/// Per selector program (held, so that its address stays its key), one
/// verdict per device: 0 not evaluated, 1 match, 2 no match. Errors are not
/// kept. At most [`MAX_MEMO_PROGRAMS`] programs; a new one past that starts
/// over.
#[derive(Debug, Default)]
struct Verdicts(Vec<(Compiled, Vec<u8>)>);

const MAX_MEMO_PROGRAMS: usize = 32;

impl SliceData {
    /// `eval`'s verdict for selector `program` on device `device`, kept
    /// when it is not an error.
    fn verdict(
        &self,
        program: &Compiled,
        device: usize,
        eval: impl FnOnce() -> Result<bool, String>,
    ) -> Result<bool, String> {
        {
            let memo = self.verdicts.lock();
            if let Some((_, v)) = memo.0.iter().find(|(p, _)| Arc::ptr_eq(p, program)) {
                match v.get(device) {
                    Some(1) => return Ok(true),
                    Some(2) => return Ok(false),
                    _ => {}
                }
            }
        }
        let verdict = eval()?;
        let mut memo = self.verdicts.lock();
        let at = match memo.0.iter().position(|(p, _)| Arc::ptr_eq(p, program)) {
            Some(at) => at,
            None => {
                if memo.0.len() >= MAX_MEMO_PROGRAMS {
                    memo.0.clear();
                }
                memo.0.push((program.clone(), vec![0; self.cel.len()]));
                memo.0.len() - 1
            }
        };
        if let Some(slot) = memo.0[at].1.get_mut(device) {
            *slot = if verdict { 1 } else { 2 };
        }
        Ok(verdict)
    }
}

impl SliceData {
    pub fn new(slice: Slice) -> Self {
        let cel = slice
            .devices
            .iter()
            .map(|d| DeviceVal::new(d, &slice.driver))
            .collect();
        let ranked = slice
            .devices
            .iter()
            .map(|d| (device_id(&slice, d), rank_device(&slice, d)))
            .collect();
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        Self {
            slice,
            cel,
            ranked,
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            verdicts: Mutex::default(),
        }
    }
}

/// `<driver>/<pool>/<device>`.
pub type DeviceId = String;

fn device_id(s: &Slice, d: &Device) -> DeviceId {
    format!("{}/{}/{}", s.driver, s.pool, d.name)
}

/// The devices taken: a persistent set, so that each cycle's copy costs
/// nothing and the store updates it in place; hashed with foldhash (every
/// node's devices are looked up in it each cycle).
pub type InUse =
    imbl::GenericHashSet<DeviceId, foldhash::fast::RandomState, imbl::shared_ptr::DefaultSharedPtr>;

/// A generation per pool (`<driver>/<pool>`) that changes whenever a
/// device of the pool enters or leaves [`InUse`]: a node whose pools'
/// generations are the ones of an earlier search has the same devices
/// free, so the search's result holds again ([`Memo`]). A pool not in
/// the map is at generation 0.
pub type PoolGens = imbl::GenericHashMap<
    String,
    u64,
    foldhash::fast::RandomState,
    imbl::shared_ptr::DefaultSharedPtr,
>;

/// The pool key of a device id: `<driver>/<pool>` (device names have no
/// `/`; pool names may).
pub fn pool_of(id: &str) -> &str {
    id.rsplit_once('/').map_or(id, |(pool, _)| pool)
}

/// The slices and classes with their lookups: what changes only when a
/// slice or class does, so the store builds it once and every cycle until
/// then shares it.
pub struct Index {
    pub slices: Vec<Arc<SliceData>>,
    pub classes: HashMap<String, Arc<Class>>,
    /// Slices by the node they name (`nodeName`), and the others.
    by_node: HashMap<String, Vec<usize>>,
    shared: Vec<usize>,
    /// Every slice of each pool, by (driver, pool).
    pools: HashMap<(String, String), Vec<usize>>,
    /// The slices with devices that consume counters.
    consuming: Vec<usize>,
    /// What [`gather`] found for nodes whose candidate slices all name
    /// them (so that it depends on nothing else), by node name.
    gathered: Mutex<HashMap<String, Arc<Gathered>>>,
    /// Searches answered from a [`Memo`].
    memo_hits: AtomicU64,
}

/// A node's pools, and (when they depend on nothing but the slices that
/// name the node) the searches already done on them.
struct Gathered {
    pools: Vec<Pool>,
    memo: Option<Mutex<Vec<Memo>>>,
}

impl std::ops::Deref for Gathered {
    type Target = Vec<Pool>;

    fn deref(&self) -> &Vec<Pool> {
        &self.pools
    }
}

/// Searches kept per node: the pods of a workload ask for the same
/// devices, and a pod's allocation changes one node's pools; every other
/// node's answer is the one it gave the previous pod.
const MEMO_PER_NODE: usize = 4;

/// One search on a node: for claims with these requests and constraints,
/// at most `limit` solutions, when the node's pools were at `gens`.
/// Searches that failed or that the deadline cut short are not kept.
struct Memo {
    shape: Vec<(Vec<Request>, Vec<Constraint>)>,
    limit: usize,
    gens: Vec<u64>,
    /// The solutions (none: the claims cannot be allocated here), and the
    /// subrequests the first chose.
    solutions: Vec<Vec<Vec<Pick>>>,
    first_alts: Option<Vec<Vec<Option<usize>>>>,
    /// Whether each device of the node's usable pools is taken (for
    /// rankers), once asked.
    allocated: Option<Vec<bool>>,
}

impl Memo {
    fn matches(&self, claims: &[&Claim], limit: usize, gens: &[u64]) -> bool {
        self.limit == limit
            && self.gens == gens
            && self.shape.len() == claims.len()
            && self
                .shape
                .iter()
                .zip(claims)
                .all(|((r, c), claim)| *r == claim.requests && *c == claim.constraints)
    }
}

/// A chosen device as a [`Memo`] keeps it: by request and alternative
/// index rather than by name.
#[derive(Debug, Clone, Copy)]
struct Pick {
    loc: Loc,
    r: u32,
    a: u32,
    admin: bool,
}

impl Index {
    pub fn new(slices: Vec<Arc<SliceData>>, classes: HashMap<String, Arc<Class>>) -> Self {
        let mut by_node: HashMap<String, Vec<usize>> = HashMap::new();
        let mut shared = Vec::new();
        let mut pools: HashMap<(String, String), Vec<usize>> = HashMap::new();
        let mut consuming = Vec::new();
        for (i, sd) in slices.iter().enumerate() {
            let s = &sd.slice;
            match &s.scope {
                NodeScope::Name(n) => by_node.entry(n.clone()).or_default().push(i),
                _ => shared.push(i),
            }
            pools
                .entry((s.driver.clone(), s.pool.clone()))
                .or_default()
                .push(i);
            if s.devices.iter().any(|d| !d.consumes.is_empty()) {
                consuming.push(i);
            }
        }
        Self {
            slices,
            classes,
            by_node,
            shared,
            pools,
            consuming,
            gathered: Mutex::default(),
            memo_hits: AtomicU64::new(0),
        }
    }

    /// How many searches were answered from a kept one.
    pub fn memo_hits(&self) -> u64 {
        self.memo_hits.load(Ordering::Relaxed)
    }
}

/// What every node's allocation of one pod's claims starts from: the
/// slices and classes of the cycle, and the devices already taken.
pub struct Inputs {
    index: Arc<Index>,
    /// Devices allocated (outside admin access) or in flight.
    pub in_use: InUse,
    /// The generation of each pool's devices in `in_use`.
    pub generations: PoolGens,
    /// Devices that allow multiple allocations, with the capacity their
    /// shares (allocated or in flight) consume.
    pub shares: SharedUse,
    pub cel: Arc<cel::Cache>,
    /// Counters used by the devices in use, by (driver, pool), counter
    /// set and counter.
    consumed: HashMap<(String, String), HashMap<String, HashMap<String, Nanos>>>,
}

impl std::ops::Deref for Inputs {
    type Target = Index;

    fn deref(&self) -> &Index {
        &self.index
    }
}

impl Inputs {
    pub fn new(
        slices: Vec<Arc<SliceData>>,
        classes: HashMap<String, Arc<Class>>,
        in_use: HashSet<DeviceId>,
        cel: Arc<cel::Cache>,
    ) -> Self {
        Self::with_index(
            Arc::new(Index::new(slices, classes)),
            in_use.into_iter().collect(),
            PoolGens::default(),
            cel,
        )
    }

    /// The inputs of a cycle from a shared index, the devices taken and
    /// their pools' generations (which must change with `in_use`: the
    /// index keeps searches by them).
    pub fn with_index(
        index: Arc<Index>,
        in_use: InUse,
        generations: PoolGens,
        cel: Arc<cel::Cache>,
    ) -> Self {
        let mut consumed: HashMap<(String, String), HashMap<String, HashMap<String, Nanos>>> =
            HashMap::new();
        for &i in &index.consuming {
            let sd = &index.slices[i];
            let s = &sd.slice;
            for (d, (id, _)) in s.devices.iter().zip(&sd.ranked) {
                if d.consumes.is_empty() || !in_use.contains(id) {
                    continue;
                }
                let sets = consumed
                    .entry((s.driver.clone(), s.pool.clone()))
                    .or_default();
                for (set, counters) in &d.consumes {
                    let c = sets.entry(set.clone()).or_default();
                    for (k, v) in counters {
                        *c.entry(k.clone()).or_default() += v;
                    }
                }
            }
        }
        Self {
            index,
            in_use,
            generations,
            shares: SharedUse::default(),
            cel,
            consumed,
        }
    }

    /// Whether a claim holds the device, whole or (one that allows
    /// multiple allocations) by a share: what device rankers see as
    /// allocated.
    pub fn held(&self, id: &str) -> bool {
        self.in_use.contains(id) || self.shares.contains_key(id)
    }

    /// With the shares of devices that allow multiple allocations: their
    /// capacity, and their counters (once per device, however many
    /// shares).
    pub fn with_shared(mut self, shared: SharedUse) -> Self {
        for &i in &self.index.consuming {
            let sd = &self.index.slices[i];
            let s = &sd.slice;
            for (d, (id, _)) in s.devices.iter().zip(&sd.ranked) {
                if d.consumes.is_empty() || self.in_use.contains(id) || !shared.contains_key(id) {
                    continue;
                }
                let sets = self
                    .consumed
                    .entry((s.driver.clone(), s.pool.clone()))
                    .or_default();
                for (set, counters) in &d.consumes {
                    let c = sets.entry(set.clone()).or_default();
                    for (k, v) in counters {
                        *c.entry(k.clone()).or_default() += v;
                    }
                }
            }
        }
        self.shares = shared;
        self
    }
}

/// Why an allocation could not be tried (upstream's Error status: the
/// whole scheduling attempt fails).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AllocError(pub String);

/// What a node gives one claim.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimResult {
    /// `status.allocation` to write (without `allocationTimestamp`).
    pub allocation: Value,
    pub devices: Vec<DeviceId>,
    /// The request (or subrequest) each device serves.
    pub requests: Vec<String>,
    /// The devices of `devices` that allow multiple allocations, with the
    /// capacity this claim consumes of each (not held whole).
    pub shares: Vec<(DeviceId, Consumed)>,
    /// Score: `8 - i` for each prioritized-list request satisfied by its
    /// `i`-th subrequest.
    pub score: i64,
}

/// The outcome on one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// One result per claim, in the order given.
    Allocated(Vec<ClaimResult>),
    /// No solution (`invalid`: an invalid pool was among the candidates).
    None { invalid: bool },
}

/// A pool as one node sees it.
struct Pool {
    driver: String,
    name: String,
    /// `<driver>/<name>` ([`PoolGens`]' key).
    key: String,
    /// The slices of the pool that target the node, sorted by name.
    slices: Vec<usize>,
    incomplete: bool,
    invalid: Option<String>,
    /// Counter sets of the pool, by name.
    counters: HashMap<String, CounterSet>,
}

/// Where a device is: pool, slice within the pool, device within the
/// slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Loc {
    pool: usize,
    slice: usize,
    device: usize,
}

/// [`gather_pools`], kept in the index for a node when only slices that
/// name it are candidates (nothing else, such as its labels, matters).
fn gather(inputs: &Inputs, node: &Node) -> Arc<Gathered> {
    let cacheable = inputs.shared.is_empty();
    if cacheable {
        if let Some(p) = inputs.gathered.lock().get(&node.name) {
            return p.clone();
        }
    }
    let pools = Arc::new(Gathered {
        pools: gather_pools(inputs, node),
        memo: cacheable.then(Mutex::default),
    });
    if cacheable {
        let mut gathered = inputs.gathered.lock();
        // Bounded by the nodes that have slices.
        if gathered.len() <= inputs.by_node.len() {
            gathered.insert(node.name.clone(), pools.clone());
        }
    }
    pools
}

/// Relevant slices of `node`, by pool, sorted by driver and pool name
/// (upstream's `GatherPools`).
fn gather_pools(inputs: &Inputs, node: &Node) -> Vec<Pool> {
    let mut relevant: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    let candidates = inputs
        .by_node
        .get(&node.name)
        .into_iter()
        .flatten()
        .chain(&inputs.shared);
    for &i in candidates {
        let s = &inputs.slices[i].slice;
        let applies = match &s.scope {
            NodeScope::PerDevice => s.devices.iter().any(|d| {
                d.scope
                    .as_ref()
                    .is_some_and(|sc| sc.matches(&node.name, &node.labels))
            }),
            scope => scope.matches(&node.name, &node.labels),
        };
        if !applies {
            continue;
        }
        let key = (s.driver.clone(), s.pool.clone());
        let kept = relevant.entry(key).or_default();
        match kept.first().map(|&k| inputs.slices[k].slice.generation) {
            Some(g) if s.generation < g => {}
            Some(g) if s.generation > g => *kept = vec![i],
            _ => kept.push(i),
        }
    }
    let mut out = Vec::new();
    for ((driver, name), mut slices) in relevant {
        let first = &inputs.slices[slices[0]].slice;
        let (generation, count) = (first.generation, first.slice_count);
        let all = inputs
            .pools
            .get(&(driver.clone(), name.clone()))
            .cloned()
            .unwrap_or_default();
        let mut incomplete = false;
        if slices.len() as i64 != count {
            if all
                .iter()
                .any(|&i| inputs.slices[i].slice.generation > generation)
            {
                // Obsolete: a newer generation is being published.
                continue;
            }
            let at_gen = all
                .iter()
                .filter(|&&i| inputs.slices[i].slice.generation == generation)
                .count();
            incomplete = at_gen as i64 != count;
        }
        slices.sort_by(|a, b| {
            inputs.slices[*a]
                .slice
                .name
                .cmp(&inputs.slices[*b].slice.name)
        });
        let mut counters = HashMap::new();
        let mut invalid = None;
        for &i in all
            .iter()
            .filter(|&&i| inputs.slices[i].slice.generation == generation)
        {
            for c in &inputs.slices[i].slice.counter_sets {
                if counters.insert(c.name.clone(), c.clone()).is_some() {
                    invalid.get_or_insert_with(|| format!("duplicate counter set name {}", c.name));
                }
            }
        }
        let mut names = HashSet::new();
        for &i in &slices {
            for d in &inputs.slices[i].slice.devices {
                if !names.insert(d.name.as_str()) {
                    invalid.get_or_insert_with(|| format!("duplicate device name {}", d.name));
                }
                for (set, cs) in &d.consumes {
                    match counters.get(set) {
                        None => {
                            invalid.get_or_insert_with(|| format!("counter set {set} not found"));
                        }
                        Some(c) => {
                            if let Some(k) = cs.keys().find(|k| !c.counters.contains_key(*k)) {
                                invalid.get_or_insert_with(|| {
                                    format!("counter {k} not found in counter set {set}")
                                });
                            }
                        }
                    }
                }
            }
        }
        out.push(Pool {
            key: format!("{driver}/{name}"),
            driver,
            name,
            slices,
            incomplete,
            invalid,
            counters,
        });
    }
    // Pools with binding conditions come last (upstream's
    // `GatherPools`): a device that binds at once is preferred.
    out.sort_by_key(|p| {
        p.slices.iter().any(|&i| {
            inputs.slices[i]
                .slice
                .devices
                .iter()
                .any(|d| !d.binding_conditions.is_empty())
        })
    });
    out
}

/// One alternative of a request, ready to search.
struct Alt<'a> {
    exact: &'a Exact,
    /// Class selectors, then the request's.
    selectors: Vec<(Compiled, Source)>,
    /// `All`: the devices, in search order.
    all: Option<Vec<Loc>>,
    count: usize,
}

#[derive(Clone, Copy)]
enum Source {
    Class(usize),
    Claim(usize),
}

struct Req<'a> {
    name: &'a str,
    first_available: bool,
    alts: Vec<Alt<'a>>,
}

struct ClaimReq<'a> {
    claim: &'a Claim,
    requests: Vec<Req<'a>>,
}

/// A device chosen for a claim (copied into each solution found, so it
/// holds no allocation).
#[derive(Debug, Clone, Copy)]
struct Chosen<'a> {
    loc: Loc,
    request: &'a str,
    admin: bool,
    /// The request and alternative (of the claim) it serves.
    r: u32,
    a: u32,
}

/// The search's state for one node.
struct Search<'a> {
    inputs: &'a Inputs,
    node: &'a Node,
    pools: Arc<Gathered>,
    claims: Vec<ClaimReq<'a>>,
    /// Devices chosen in this attempt (any claim).
    allocating: HashSet<Loc>,
    /// Counters this attempt's devices consume, by pool and set.
    consuming: HashMap<(usize, String), HashMap<String, Nanos>>,
    /// Shares of devices that allow multiple allocations taken in this
    /// attempt: how many, and the capacity they consume.
    sharing: HashMap<Loc, (u32, Consumed)>,
    results: Vec<Vec<Chosen<'a>>>,
    /// The subrequest chosen per claim and request.
    chosen_alt: Vec<Vec<Option<usize>>>,
    /// Per claim constraint: the values of the devices added so far.
    constraint_values: Vec<Vec<Vec<Attr>>>,
    /// Selector verdicts: (device, claim, request, alternative).
    verdicts: HashMap<(Loc, usize, usize, usize), bool, foldhash::fast::RandomState>,
    /// Search steps taken (the clock is read every [`CLOCK_EVERY`]).
    steps: usize,
    deadline: Option<Instant>,
    /// How many solutions to collect (1: upstream's first fit).
    limit: usize,
    /// The solutions found, in search order (the first is upstream's):
    /// the devices chosen per claim.
    solutions: Vec<Vec<Vec<Chosen<'a>>>>,
    /// The subrequests the first solution chose: later solutions must
    /// choose the same (a prioritized list's order is not the ranker's
    /// to change).
    first_alts: Option<Vec<Vec<Option<usize>>>>,
    /// Search steps taken since the first solution.
    extra_steps: usize,
    /// The deadline ended the enumeration (its result depends on time).
    cut: bool,
}

impl<'a> Search<'a> {
    fn slice(&self, loc: Loc) -> &'a SliceData {
        let i = self.pools[loc.pool].slices[loc.slice];
        &self.inputs.slices[i]
    }

    fn device(&self, loc: Loc) -> &'a Device {
        &self.slice(loc).slice.devices[loc.device]
    }

    fn id(&self, loc: Loc) -> &'a DeviceId {
        &self.slice(loc).ranked[loc.device].0
    }

    /// Every device location, in search order, from `start`.
    fn locations(&self, start: Loc) -> Vec<Loc> {
        let mut out = Vec::new();
        for (p, pool) in self.pools.iter().enumerate().skip(start.pool) {
            if pool.incomplete || pool.invalid.is_some() {
                continue;
            }
            for (s, &si) in pool.slices.iter().enumerate() {
                if p == start.pool && s < start.slice {
                    continue;
                }
                let n = self.inputs.slices[si].slice.devices.len();
                let first = if p == start.pool && s == start.slice {
                    start.device
                } else {
                    0
                };
                out.extend((first..n).map(|d| Loc {
                    pool: p,
                    slice: s,
                    device: d,
                }));
            }
        }
        out
    }

    fn check_deadline(&self) -> Result<(), AllocError> {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(AllocError(format!(
                "node {}: timed out trying to allocate devices",
                self.node.name
            )));
        }
        Ok(())
    }

    /// Whether the device matches the alternative's selectors (and, with
    /// per-device node selection, the node). CEL errors abort.
    fn selectable(&mut self, loc: Loc, c: usize, r: usize, a: usize) -> Result<bool, AllocError> {
        if let Some(v) = self.verdicts.get(&(loc, c, r, a)) {
            return Ok(*v);
        }
        let sd = self.slice(loc);
        let d = &sd.slice.devices[loc.device];
        let mut ok = true;
        if let NodeScope::PerDevice = sd.slice.scope {
            ok = d
                .scope
                .as_ref()
                .is_some_and(|s| s.matches(&self.node.name, &self.node.labels));
        }
        if ok {
            let dv = &sd.cel[loc.device];
            let alt = &self.claims[c].requests[r].alts[a];
            for (program, source) in &alt.selectors {
                let name = |source: &Source| match source {
                    Source::Class(i) => format!("class {}: selector #{i}", alt.exact.class),
                    Source::Claim(i) => {
                        format!("claim {}: selector #{i}", self.claims[c].claim.key())
                    }
                };
                let compiled = match &**program {
                    Ok(p) => p,
                    Err(e) => {
                        return Err(AllocError(format!(
                            "{}: CEL compile error: {e}",
                            name(source)
                        )))
                    }
                };
                let verdict = match dv.invalid() {
                    Some(e) => Err(e.to_string()),
                    None => sd.verdict(program, loc.device, || cel::matches(compiled, dv)),
                };
                match verdict {
                    Ok(true) => {}
                    Ok(false) => {
                        ok = false;
                        break;
                    }
                    Err(e) => {
                        return Err(AllocError(format!(
                            "{} on device {}: CEL runtime error: {e}",
                            name(source),
                            device_id(&sd.slice, d)
                        )))
                    }
                }
            }
        }
        self.verdicts.insert((loc, c, r, a), ok);
        Ok(ok)
    }

    fn in_use(&self, loc: Loc) -> bool {
        self.allocating.contains(&loc) || self.inputs.in_use.contains(self.id(loc))
    }

    /// Takes the device for claim `c`'s request (`must`: `All` mode, where
    /// a constraint failure is an error). `Ok(false)`: it cannot be taken.
    fn take(
        &mut self,
        loc: Loc,
        c: usize,
        r: usize,
        a: usize,
        must: bool,
    ) -> Result<bool, AllocError> {
        let alt = &self.claims[c].requests[r].alts[a];
        let admin = alt.exact.admin_access;
        let d = self.device(loc);
        if admin {
            if !d.allow_multiple && self.results[c].iter().any(|x| x.loc == loc) {
                return Ok(false);
            }
        } else if self.in_use(loc) {
            return Ok(false);
        }
        // Consumable capacity: what the request consumes must fit beside
        // the device's other shares, within its request policy.
        let current = self.inputs.shares.get(self.id(loc));
        let fits = capacity::fits(
            current.map(|s| &s.consumed),
            self.sharing.get(&loc).map(|(_, c)| c),
            &alt.exact.capacity,
            &d.capacities,
        )
        .map_err(|e| {
            AllocError(format!(
                "claim {}, request {}: checking capacity for device {}: {e}",
                self.claims[c].claim.key(),
                alt.exact.name,
                self.id(loc)
            ))
        })?;
        if !fits {
            return Ok(false);
        }
        // A shared device already in use has its counters accounted for.
        let shared_in_use =
            d.allow_multiple && (current.is_some() || self.sharing.contains_key(&loc));
        if !d.consumes.is_empty() && !shared_in_use && !self.counters_fit(loc) {
            return Ok(false);
        }
        let tolerated = |t: &crate::model::dra::Taint| {
            !matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
                || alt.exact.tolerations.iter().any(|tol| tol.tolerates(t))
        };
        if !d.taints.iter().all(tolerated) {
            return Ok(false);
        }
        let exact: &'a Exact = alt.exact;
        let request: &'a str = &exact.name;
        let parent = self.claims[c].requests[r].name;
        let constraints = &self.claims[c].claim.constraints;
        let mut added: Vec<usize> = Vec::new();
        for (k, con) in constraints.iter().enumerate() {
            if !applies(con, parent, request) {
                continue;
            }
            let value = d.attributes.get(&con.attribute);
            let fits = match value {
                None => false,
                Some(v) => {
                    let seen = &self.constraint_values[c][k];
                    if con.distinct {
                        !seen.contains(v)
                    } else {
                        seen.first().is_none_or(|first| first == v)
                    }
                }
            };
            if !fits {
                for k in added {
                    self.constraint_values[c][k].pop();
                }
                if must {
                    return Err(AllocError(format!(
                        "claim {}, request {request}: cannot add device {} because a claim constraint would not be satisfied",
                        self.claims[c].claim.key(),
                        self.id(loc)
                    )));
                }
                return Ok(false);
            }
            if let Some(v) = value {
                self.constraint_values[c][k].push(v.clone());
                added.push(k);
            }
        }
        if !admin && !d.allow_multiple {
            self.allocating.insert(loc);
        }
        if !shared_in_use {
            for (set, counters) in &d.consumes {
                let used = self.consuming.entry((loc.pool, set.clone())).or_default();
                for (k, v) in counters {
                    *used.entry(k.clone()).or_default() += v;
                }
            }
        }
        if d.allow_multiple {
            let consumed = capacity::consumed_map(&exact.capacity, &d.capacities);
            let entry = self.sharing.entry(loc).or_default();
            entry.0 += 1;
            for (k, v) in consumed {
                *entry.1.entry(k).or_default() += v;
            }
        }
        self.results[c].push(Chosen {
            loc,
            request,
            admin,
            r: r as u32,
            a: a as u32,
        });
        Ok(true)
    }

    /// Undoes the last [`Search::take`] of claim `c`.
    fn give_back(&mut self, c: usize, r: usize) {
        let Some(chosen) = self.results[c].pop() else {
            return;
        };
        let parent = self.claims[c].requests[r].name;
        let d = self.device(chosen.loc);
        for (k, con) in self.claims[c].claim.constraints.iter().enumerate() {
            if applies(con, parent, chosen.request) && d.attributes.contains_key(&con.attribute) {
                self.constraint_values[c][k].pop();
            }
        }
        if !chosen.admin && !d.allow_multiple {
            self.allocating.remove(&chosen.loc);
        }
        // The last share of a shared device taken in this attempt gives
        // back its counters (undone in the reverse order of taking).
        let mut counters_held = true;
        if d.allow_multiple {
            let exact = self.claims[c].requests[r].alts[chosen.a as usize].exact;
            let consumed = capacity::consumed_map(&exact.capacity, &d.capacities);
            if let Some(entry) = self.sharing.get_mut(&chosen.loc) {
                entry.0 -= 1;
                for (k, v) in consumed {
                    if let Some(x) = entry.1.get_mut(&k) {
                        *x -= v;
                    }
                }
                if entry.0 == 0 {
                    self.sharing.remove(&chosen.loc);
                }
            }
            counters_held = !self.sharing.contains_key(&chosen.loc)
                && !self.inputs.shares.contains_key(self.id(chosen.loc));
        }
        for (set, counters) in d.consumes.iter().filter(|_| counters_held) {
            if let Some(used) = self.consuming.get_mut(&(chosen.loc.pool, set.clone())) {
                for (k, v) in counters {
                    if let Some(x) = used.get_mut(k) {
                        *x -= v;
                    }
                }
            }
        }
    }

    /// Whether the pool's counters stay within their sets with this
    /// device added: upstream checks every counter of the pool, so an
    /// over-committed counter blocks every device that consumes counters.
    fn counters_fit(&self, loc: Loc) -> bool {
        let pool = &self.pools[loc.pool];
        let d = self.device(loc);
        let used_before = self
            .inputs
            .consumed
            .get(&(pool.driver.clone(), pool.name.clone()));
        for (set_name, set) in &pool.counters {
            for (k, total) in &set.counters {
                let mut used = used_before
                    .and_then(|u| u.get(set_name))
                    .and_then(|u| u.get(k))
                    .copied()
                    .unwrap_or(0);
                used += self
                    .consuming
                    .get(&(loc.pool, set_name.clone()))
                    .and_then(|u| u.get(k))
                    .copied()
                    .unwrap_or(0);
                used += d
                    .consumes
                    .iter()
                    .filter(|(s, _)| s == set_name)
                    .filter_map(|(_, c)| c.get(k))
                    .sum::<Nanos>();
                if used > *total {
                    return false;
                }
            }
        }
        true
    }

    /// Upstream's `allocateOne`: the first solution from (claim, request,
    /// alternative, device index), devices at or after `start`.
    fn search(
        &mut self,
        c: usize,
        r: usize,
        alt: Option<usize>,
        n: usize,
        start: Loc,
    ) -> Result<bool, AllocError> {
        // Reading the clock costs about as much as a step: every
        // CLOCK_EVERY steps, the first included.
        let clock = self.steps.is_multiple_of(CLOCK_EVERY);
        self.steps += 1;
        if self.solutions.is_empty() {
            if clock {
                self.check_deadline()?;
            }
        } else {
            // Enumerating alternatives: bounded work, and the deadline
            // ends it with what was found rather than failing.
            self.extra_steps += 1;
            if self.extra_steps > ENUMERATION_STEPS {
                return Ok(true);
            }
            if clock && self.deadline.is_some_and(|d| Instant::now() >= d) {
                self.cut = true;
                return Ok(true);
            }
        }
        if c == self.claims.len() {
            if self.first_alts.is_none() {
                self.first_alts = Some(self.chosen_alt.clone());
            }
            if self.first_alts.as_ref() == Some(&self.chosen_alt) {
                self.solutions.push(self.results.clone());
            }
            return Ok(self.solutions.len() >= self.limit);
        }
        if r == self.claims[c].requests.len() {
            return self.search(c + 1, 0, None, 0, Loc::default());
        }
        let Some(a) = alt else {
            let alternatives = self.claims[c].requests[r].alts.len();
            for a in 0..alternatives {
                if self.first_alts.as_ref().is_some_and(|f| f[c][r] != Some(a)) {
                    continue;
                }
                self.chosen_alt[c][r] = Some(a);
                if self.search(c, r, Some(a), 0, Loc::default())? {
                    return Ok(true);
                }
            }
            self.chosen_alt[c][r] = None;
            return Ok(false);
        };
        let (count, all) = {
            let alt = &self.claims[c].requests[r].alts[a];
            (alt.count, alt.all.clone())
        };
        if all.as_ref().is_some_and(Vec::is_empty) {
            return Ok(false);
        }
        if n == count {
            return self.search(c, r + 1, None, 0, Loc::default());
        }
        if count - n > MAX_RESULTS.saturating_sub(self.results[c].len()) {
            return Ok(false);
        }
        if let Some(all) = all {
            let loc = all[n];
            if !self.take(loc, c, r, a, true)? {
                return Ok(false);
            }
            if self.search(c, r, Some(a), n + 1, start)? {
                return Ok(true);
            }
            self.give_back(c, r);
            return Ok(false);
        }
        for loc in self.locations(start) {
            let admin = self.claims[c].requests[r].alts[a].exact.admin_access;
            if admin {
                if !self.device(loc).allow_multiple && self.results[c].iter().any(|x| x.loc == loc)
                {
                    continue;
                }
            } else if self.in_use(loc) {
                continue;
            }
            if !self.selectable(loc, c, r, a)? {
                continue;
            }
            if !self.take(loc, c, r, a, false)? {
                continue;
            }
            let next = Loc {
                device: loc.device + 1,
                ..loc
            };
            if self.search(c, r, Some(a), n + 1, next)? {
                return Ok(true);
            }
            self.give_back(c, r);
        }
        Ok(false)
    }
}

/// Whether constraint `con` covers the device of `request` (a subrequest
/// counts as its parent).
fn applies(con: &Constraint, parent: &str, request: &str) -> bool {
    con.requests.is_empty() || con.requests.iter().any(|r| r == parent || r == request)
}

/// Allocates `claims` (in order) on `node`: upstream's first fit.
pub fn allocate(
    inputs: &Inputs,
    node: &Node,
    claims: &[&Claim],
    deadline: Option<Instant>,
) -> Result<Outcome, AllocError> {
    allocate_ranked(inputs, node, claims, deadline, 1, |_, _| 0, true)
}

/// Search steps spent looking for more solutions after the first.
pub const ENUMERATION_STEPS: usize = 20_000;

/// Search steps between two readings of the clock for the deadline.
const CLOCK_EVERY: usize = 64;

/// Allocates `claims` on `node` choosing among up to `limit` solutions:
/// `choose` gets them as rankers see them (sets in upstream's search
/// order; all choose the same prioritized-list subrequests; each set's
/// devices in claim order) with the ids of the node's devices, and returns
/// the position of the one to allocate. The search after the first
/// solution is bounded by [`ENUMERATION_STEPS`] and the deadline. Without
/// `allocation`, the results' `allocation` is `null` (Filter needs only
/// the devices and scores of every node; the chosen node's allocation is
/// built again, once).
pub fn allocate_ranked(
    inputs: &Inputs,
    node: &Node,
    claims: &[&Claim],
    deadline: Option<Instant>,
    limit: usize,
    choose: impl FnOnce(RankInput, &[&DeviceId]) -> usize,
    allocation: bool,
) -> Result<Outcome, AllocError> {
    let pools = gather(inputs, node);
    let mut search = Search {
        inputs,
        node,
        pools,
        claims: Vec::new(),
        allocating: HashSet::new(),
        consuming: HashMap::new(),
        sharing: HashMap::new(),
        results: vec![Vec::new(); claims.len()],
        chosen_alt: claims
            .iter()
            .map(|c| vec![None; c.requests.len()])
            .collect(),
        constraint_values: claims
            .iter()
            .map(|c| vec![Vec::<Attr>::new(); c.constraints.len()])
            .collect(),
        verdicts: HashMap::default(),
        steps: 0,
        deadline,
        limit: limit.max(1),
        solutions: Vec::new(),
        first_alts: None,
        extra_steps: 0,
        cut: false,
    };
    // The node's pools at the generations of a search already done for
    // the same claims: its solutions hold.
    let gens: Vec<u64> = match &search.pools.memo {
        Some(_) => search
            .pools
            .iter()
            .map(|p| inputs.generations.get(&p.key).copied().unwrap_or(0))
            .collect(),
        None => Vec::new(),
    };
    let kept = lookup(&search, claims, limit, &gens);
    for claim in claims {
        let req = prepare(&search, claim, kept.is_none())?;
        search.claims.push(req);
    }
    let allocated = match kept {
        Some(kept) => recall(&mut search, kept),
        None => {
            run_search(&mut search, claims)?;
            keep(&search, claims, limit, gens.clone());
            None
        }
    };
    if search.solutions.is_empty() {
        let invalid = search.pools.iter().any(|p| p.invalid.is_some());
        return Ok(Outcome::None { invalid });
    }
    let mut solutions = std::mem::take(&mut search.solutions);
    let k = if limit <= 1 {
        0
    } else {
        let known = allocated.is_some();
        let (input, ids) = rank_input(&search, &solutions, claims, allocated);
        // The taken flags, kept with the search the first time they are
        // read (the kept search had none yet).
        if let (Some(memo), false) = (&search.pools.memo, known) {
            if let Some(e) = memo
                .lock()
                .iter_mut()
                .find(|e| e.allocated.is_none() && e.matches(claims, limit, &gens))
            {
                e.allocated = Some(input.allocated.clone());
            }
        }
        choose(input, &ids).min(solutions.len() - 1)
    };
    search.results = solutions.swap_remove(k);
    // Enumerating backtracked past the solutions: restore the subrequests
    // they all chose.
    if let Some(alts) = search.first_alts.take() {
        search.chosen_alt = alts;
    }
    let results = (0..claims.len())
        .map(|ci| result(&search, ci, allocation))
        .collect();
    Ok(Outcome::Allocated(results))
}

/// What a kept search found: solutions, subrequests of the first, taken
/// flags.
type Kept = (
    Vec<Vec<Vec<Pick>>>,
    Option<Vec<Vec<Option<usize>>>>,
    Option<Vec<bool>>,
);

/// The kept search on the same pools for the same claims, if there is
/// one.
fn lookup(search: &Search, claims: &[&Claim], limit: usize, gens: &[u64]) -> Option<Kept> {
    search.pools.memo.as_ref().and_then(|m| {
        m.lock()
            .iter()
            .find(|e| e.matches(claims, limit, gens))
            .map(|e| {
                (
                    e.solutions.clone(),
                    e.first_alts.clone(),
                    e.allocated.clone(),
                )
            })
    })
}

/// Takes a kept search's solutions as the search's own; returns its
/// taken flags, if it kept them.
fn recall(search: &mut Search, (solutions, first_alts, allocated): Kept) -> Option<Vec<bool>> {
    search.inputs.memo_hits.fetch_add(1, Ordering::Relaxed);
    search.solutions = solutions
        .iter()
        .map(|per_claim| {
            per_claim
                .iter()
                .enumerate()
                .map(|(c, picks)| picks.iter().map(|p| search.chosen(c, *p)).collect())
                .collect()
        })
        .collect();
    search.first_alts = first_alts;
    allocated
}

/// Keeps the search just done (unless the deadline cut it short) in
/// place of an older one for the same claims.
fn keep(search: &Search, claims: &[&Claim], limit: usize, gens: Vec<u64>) {
    let (Some(memo), false) = (&search.pools.memo, search.cut) else {
        return;
    };
    let entry = Memo {
        shape: claims
            .iter()
            .map(|c| (c.requests.clone(), c.constraints.clone()))
            .collect(),
        limit,
        gens,
        solutions: search
            .solutions
            .iter()
            .map(|per_claim| {
                per_claim
                    .iter()
                    .map(|chosen| chosen.iter().map(Pick::from).collect())
                    .collect()
            })
            .collect(),
        first_alts: search.first_alts.clone(),
        allocated: None,
    };
    let mut m = memo.lock();
    m.retain(|e| !(e.limit == limit && e.shape == entry.shape));
    if m.len() >= MEMO_PER_NODE {
        m.remove(0);
    }
    m.push(entry);
}

impl From<&Chosen<'_>> for Pick {
    fn from(c: &Chosen) -> Self {
        Pick {
            loc: c.loc,
            r: c.r,
            a: c.a,
            admin: c.admin,
        }
    }
}

impl<'a> Search<'a> {
    /// A kept device choice of claim `c`, named again.
    fn chosen(&self, c: usize, p: Pick) -> Chosen<'a> {
        let exact: &'a Exact = self.claims[c].requests[p.r as usize].alts[p.a as usize].exact;
        Chosen {
            loc: p.loc,
            request: &exact.name,
            admin: p.admin,
            r: p.r,
            a: p.a,
        }
    }
}

/// The search proper: `All` requests' devices, the claim limit, then
/// upstream's depth-first search for the solutions.
fn run_search(search: &mut Search, claims: &[&Claim]) -> Result<(), AllocError> {
    // `All`: every matching device of the node's pools, found now.
    for ci in 0..claims.len() {
        for ri in 0..search.claims[ci].requests.len() {
            for ai in 0..search.claims[ci].requests[ri].alts.len() {
                if search.claims[ci].requests[ri].alts[ai].exact.mode == Mode::All {
                    let all = all_devices(search, ci, ri, ai)?;
                    let alt = &mut search.claims[ci].requests[ri].alts[ai];
                    alt.count = all.len();
                    alt.all = Some(all);
                }
            }
        }
    }
    for (ci, c) in search.claims.iter().enumerate() {
        let min: usize = c
            .requests
            .iter()
            .map(|r| r.alts.iter().map(|a| a.count).min().unwrap_or(0))
            .sum();
        if min > MAX_RESULTS {
            return Err(AllocError(format!(
                "claim {}, request {}: adding {min} devices exceeds the claim limit of {MAX_RESULTS}, with 0 already accounted for",
                claims[ci].key(),
                c.requests.first().map_or("", |r| r.name)
            )));
        }
    }
    search.search(0, 0, None, 0, Loc::default())?;
    Ok(())
}

/// What rankers see of `solutions` on the search's node: the devices of
/// its usable pools (in search order), and the sets as positions into
/// them; with the devices' ids. `known`: whether each device is taken, as
/// a search on the same pool generations found.
fn rank_input<'a>(
    search: &Search<'a>,
    solutions: &[Vec<Vec<Chosen<'a>>>],
    claims: &[&Claim],
    known: Option<Vec<bool>>,
) -> (RankInput<'a>, Vec<&'a DeviceId>) {
    let inputs = search.inputs;
    let mut devices = Vec::new();
    let mut allocated = Vec::new();
    let mut ids = Vec::new();
    let mut key = Vec::new();
    // First position of each pool's slices' devices.
    let mut base: Vec<Vec<u32>> = vec![Vec::new(); search.pools.len()];
    for (p, pool) in search.pools.iter().enumerate() {
        if pool.incomplete || pool.invalid.is_some() {
            continue;
        }
        for &i in &pool.slices {
            base[p].push(devices.len() as u32);
            key.push(inputs.slices[i].serial);
            for (id, d) in &inputs.slices[i].ranked {
                devices.push(d);
                if known.is_none() {
                    allocated.push(inputs.held(id));
                }
                ids.push(id);
            }
        }
    }
    if let Some(known) = known.filter(|k| k.len() == devices.len()) {
        allocated = known;
    } else if allocated.len() != devices.len() {
        allocated = ids.iter().map(|id| inputs.held(id)).collect();
    }
    let mut requests: Vec<String> = Vec::new();
    // (claim, request) of each of `requests` (a few: searched in order).
    let mut request_ix: Vec<(usize, &str)> = Vec::new();
    let sets = solutions
        .iter()
        .map(|per_claim| {
            let mut set = DeviceSet {
                devices: Vec::new(),
                requests: Vec::new(),
            };
            for (ci, chosen) in per_claim.iter().enumerate() {
                for c in chosen {
                    let at = base
                        .get(c.loc.pool)
                        .and_then(|b| b.get(c.loc.slice))
                        .copied()
                        .unwrap_or(0);
                    set.devices.push(at + c.loc.device as u32);
                    let r = match request_ix.iter().position(|&k| k == (ci, c.request)) {
                        Some(r) => r,
                        None => {
                            request_ix.push((ci, c.request));
                            requests.push(format!("{}/{}", claims[ci].name, c.request));
                            requests.len() - 1
                        }
                    };
                    set.requests.push(r as u32);
                }
            }
            set
        })
        .collect();
    (
        RankInput {
            devices,
            allocated,
            requests,
            sets,
            devices_key: Some(key),
        },
        ids,
    )
}

/// A device as rankers see it: names fully qualified (the driver is the
/// domain of a bare name), values as text.
fn rank_device(s: &Slice, d: &Device) -> RankDevice {
    let qualify = |k: &str| {
        if k.contains('/') {
            k.to_string()
        } else {
            format!("{}/{k}", s.driver)
        }
    };
    RankDevice {
        driver: s.driver.clone(),
        pool: s.pool.clone(),
        name: d.name.clone(),
        attributes: d
            .attributes
            .iter()
            .map(|(k, v)| (qualify(k), v.to_string()))
            .collect(),
        capacity: d
            .capacity
            .iter()
            .map(|(k, v)| (qualify(k), crate::model::dra::nanos_text(*v)))
            .collect(),
    }
}

/// The claim's requests with their classes and compiled selectors.
/// Without `compile`, the selectors are left out (a kept search is
/// reused: nothing is evaluated).
fn prepare<'a>(
    search: &Search<'a>,
    claim: &'a Claim,
    compile: bool,
) -> Result<ClaimReq<'a>, AllocError> {
    let key = || claim.key();
    let mut requests = Vec::new();
    for r in &claim.requests {
        let mut alts = Vec::new();
        for e in &r.alternatives {
            let class = search.inputs.classes.get(&e.class).ok_or_else(|| {
                AllocError(format!(
                    "claim {}, request {}: could not retrieve device class {}: deviceclass.resource.k8s.io \"{}\" not found",
                    key(), e.name, e.class, e.class
                ))
            })?;
            let mut selectors = Vec::new();
            if compile {
                for (i, s) in class.selectors.iter().enumerate() {
                    selectors.push((search.inputs.cel.get(s), Source::Class(i)));
                }
                for (i, s) in e.selectors.iter().enumerate() {
                    selectors.push((search.inputs.cel.get(s), Source::Claim(i)));
                }
            }
            let count = match e.mode {
                Mode::ExactCount(n) if n < 0 || n as usize > MAX_RESULTS * 1024 => {
                    return Err(AllocError(format!(
                        "claim {}, request {}: exact count {n} is too large",
                        key(),
                        e.name
                    )))
                }
                Mode::ExactCount(n) => n as usize,
                Mode::All => 0,
            };
            alts.push(Alt {
                exact: e,
                selectors,
                all: None,
                count,
            });
        }
        requests.push(Req {
            name: &r.name,
            first_available: r.first_available,
            alts,
        });
    }
    Ok(ClaimReq { claim, requests })
}

/// The devices an `All` request takes on this node.
fn all_devices(search: &mut Search, c: usize, r: usize, a: usize) -> Result<Vec<Loc>, AllocError> {
    let key = search.claims[c].claim.key();
    let name = search.claims[c].requests[r].alts[a].exact.name.clone();
    let mut out = Vec::new();
    for p in 0..search.pools.len() {
        let pool = &search.pools[p];
        let id = format!("{}/{}", pool.driver, pool.name);
        if pool.incomplete {
            return Err(AllocError(format!(
                "claim {key}, request {name}: asks for all devices, but resource pool {id} is currently being updated"
            )));
        }
        if pool.invalid.is_some() {
            return Err(AllocError(format!(
                "claim {key}, request {name}: asks for all devices, but resource pool {id} is currently invalid"
            )));
        }
        for s in 0..search.pools[p].slices.len() {
            let n = search.inputs.slices[search.pools[p].slices[s]]
                .slice
                .devices
                .len();
            for d in 0..n {
                let loc = Loc {
                    pool: p,
                    slice: s,
                    device: d,
                };
                if !search.selectable(loc, c, r, a)? {
                    continue;
                }
                // Static capacity only: what others consume is checked
                // when the device is taken, so such a device makes the
                // request fail rather than be left out.
                let d = search.device(loc);
                let exact = search.claims[c].requests[r].alts[a].exact;
                let fits =
                    capacity::fits(None, None, &exact.capacity, &d.capacities).map_err(|e| {
                        AllocError(format!(
                            "claim {key}, request {name}: checking capacity for device {}: {e}",
                            d.name
                        ))
                    })?;
                if fits {
                    out.push(loc);
                }
            }
        }
    }
    Ok(out)
}

/// The claim's devices and score, and (with `allocation`) its
/// `status.allocation`: results, config, node selector.
fn result(search: &Search, ci: usize, allocation: bool) -> ClaimResult {
    let claim = &search.claims[ci];
    let mut results = Vec::new();
    let mut devices = Vec::new();
    let mut requests = Vec::new();
    let mut shares = Vec::new();
    for ch in &search.results[ci] {
        let sd = search.slice(ch.loc);
        let d = &sd.slice.devices[ch.loc.device];
        let id = &sd.ranked[ch.loc.device].0;
        devices.push(id.clone());
        requests.push(ch.request.to_string());
        let alt = claim
            .requests
            .iter()
            .flat_map(|r| &r.alts)
            .find(|a| a.exact.name == ch.request);
        // Consumable capacity: a share of the device, and what it takes.
        let consumed = match (d.allow_multiple, alt) {
            (true, Some(a)) => capacity::consume_all(&a.exact.capacity, &d.capacities).ok(),
            _ => None,
        };
        if let Some(amounts) = &consumed {
            let map = d
                .capacities
                .iter()
                .zip(amounts)
                .map(|(c, a)| (c.name.clone(), a.n))
                .collect();
            shares.push((id.clone(), map));
        }
        if !allocation {
            continue;
        }
        let mut r = json!({
            "request": ch.request,
            "driver": sd.slice.driver,
            "pool": sd.slice.pool,
            "device": d.name,
        });
        if ch.admin {
            r["adminAccess"] = json!(true);
        }
        if let Some(a) = alt.filter(|a| !a.exact.tolerations.is_empty()) {
            r["tolerations"] =
                Value::Array(a.exact.tolerations.iter().map(|t| t.raw.clone()).collect());
        }
        // DRADeviceBindingConditions: the device's conditions travel with
        // the allocation; PreBind waits for them.
        if !d.binding_conditions.is_empty() {
            r["bindingConditions"] = json!(d.binding_conditions);
            r["bindingFailureConditions"] = json!(d.binding_failure_conditions);
        }
        if let Some(amounts) = consumed {
            r["shareID"] = json!(capacity::share_id(&claim.claim.uid, ch.request, id));
            if !amounts.is_empty() {
                let m: serde_json::Map<String, Value> = d
                    .capacities
                    .iter()
                    .zip(amounts)
                    .map(|(c, a)| (c.name.clone(), Value::String(a.text)))
                    .collect();
                r["consumedCapacity"] = Value::Object(m);
            }
        }
        results.push(r);
    }
    let mut score = 0;
    for (ri, req) in claim.requests.iter().enumerate() {
        if let (true, Some(i)) = (req.first_available, search.chosen_alt[ci][ri]) {
            score += MAX_SUBREQUESTS - i as i64;
        }
    }
    if !allocation {
        return ClaimResult {
            allocation: Value::Null,
            devices,
            requests,
            shares,
            score,
        };
    }
    let mut allocation = json!({
        "devices": {"results": results, "config": config(search, ci)},
    });
    if let Some(sel) = node_selector(search, ci) {
        allocation["nodeSelector"] = sel;
    }
    ClaimResult {
        allocation,
        devices,
        requests,
        shares,
        score,
    }
}

/// Upstream's allocation config: each class's config once (with the
/// requests that used the class), then the claim's own entries that
/// apply; an entry covering every request has no `requests`.
fn config(search: &Search, ci: usize) -> Value {
    let claim = &search.claims[ci];
    let mut out: Vec<Value> = Vec::new();
    let mut class_entries: Vec<(String, usize, usize)> = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (ri, req) in claim.requests.iter().enumerate() {
        let Some(ai) = search.chosen_alt[ci][ri].or((!req.first_available).then_some(0)) else {
            continue;
        };
        let alt = &req.alts[ai];
        names.push(alt.exact.name.clone());
        let class = &search.inputs.classes[&alt.exact.class];
        if let Some(&(_, start, len)) = class_entries.iter().find(|(c, _, _)| *c == class.name) {
            for e in &mut out[start..start + len] {
                if let Some(rs) = e["requests"].as_array_mut() {
                    rs.push(json!(req.name));
                }
            }
            continue;
        }
        let start = out.len();
        for cfg in &class.config {
            let mut e = cfg.clone();
            e["source"] = json!("FromClass");
            e["requests"] = json!([req.name]);
            out.push(e);
        }
        class_entries.push((class.name.clone(), start, out.len() - start));
    }
    for cfg in &claim.claim.config {
        let requests: Vec<String> = cfg["requests"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let wanted = requests.is_empty()
            || requests
                .iter()
                .any(|r| claim.requests.iter().any(|q| q.name == r) || names.contains(r));
        if wanted {
            let mut e = cfg.clone();
            e["source"] = json!("FromClaim");
            out.push(e);
        }
    }
    let all: Vec<&str> = claim.requests.iter().map(|r| r.name).collect();
    for e in &mut out {
        let covers = e["requests"].as_array().is_some_and(|rs| {
            !rs.is_empty() && all.iter().all(|n| rs.iter().any(|v| v.as_str() == Some(n)))
        });
        if covers {
            if let Some(o) = e.as_object_mut() {
                o.remove("requests");
            }
        }
    }
    Value::Array(out)
}

/// Where the allocated devices can be used: the node itself when any is
/// local to it (or binds to it), else the merged selectors of network
/// devices, else anywhere (`None`).
fn node_selector(search: &Search, ci: usize) -> Option<Value> {
    let mut expressions: Vec<Value> = Vec::new();
    let mut fields: Vec<Value> = Vec::new();
    for ch in &search.results[ci] {
        let sd = search.slice(ch.loc);
        let d = &sd.slice.devices[ch.loc.device];
        let scope = match (&sd.slice.scope, &d.scope) {
            (NodeScope::PerDevice, Some(s)) => s,
            (s, _) => s,
        };
        if matches!(scope, NodeScope::Name(_)) || d.binds_to_node {
            return Some(json!({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [search.node.name]}
            ]}]}));
        }
        if let NodeScope::Selector { raw, .. } = scope {
            for term in raw {
                for (list, key) in [
                    (&mut expressions, "matchExpressions"),
                    (&mut fields, "matchFields"),
                ] {
                    for e in term[key].as_array().into_iter().flatten() {
                        if !list.contains(e) {
                            list.push(e.clone());
                        }
                    }
                }
            }
        }
    }
    if expressions.is_empty() && fields.is_empty() {
        return None;
    }
    let mut term = serde_json::Map::new();
    if !expressions.is_empty() {
        term.insert("matchExpressions".into(), Value::Array(expressions));
    }
    if !fields.is_empty() {
        term.insert("matchFields".into(), Value::Array(fields));
    }
    Some(json!({"nodeSelectorTerms": [Value::Object(term)]}))
}
