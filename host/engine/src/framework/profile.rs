//! A profile: the plugins one scheduler name runs at each extension point,
//! in order, with Score weights. Plugins are held only through the
//! extension-point traits.

use std::sync::Arc;

use super::advisor::PreemptionAdvisor;
use super::context::DeviceRanker;
use super::interface::{
    BindPlugin, FilterPlugin, InformerPlugin, PermitPlugin, Plugin, PostBindPlugin,
    PostFilterPlugin, PreBindPlugin, PreEnqueuePlugin, PreFilterPlugin, PreScorePlugin,
    QueueSortPlugin, ReservePlugin, ScorePlugin,
};

/// An extension point, as configurations and errors name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Point {
    PreEnqueue,
    QueueSort,
    PreFilter,
    Filter,
    PostFilter,
    PreScore,
    Score,
    Reserve,
    Permit,
    PreBind,
    Bind,
    PostBind,
}

impl Point {
    pub const ALL: [Point; 12] = [
        Point::PreEnqueue,
        Point::QueueSort,
        Point::PreFilter,
        Point::Filter,
        Point::PostFilter,
        Point::PreScore,
        Point::Score,
        Point::Reserve,
        Point::Permit,
        Point::PreBind,
        Point::Bind,
        Point::PostBind,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Point::PreEnqueue => "PreEnqueue",
            Point::QueueSort => "QueueSort",
            Point::PreFilter => "PreFilter",
            Point::Filter => "Filter",
            Point::PostFilter => "PostFilter",
            Point::PreScore => "PreScore",
            Point::Score => "Score",
            Point::Reserve => "Reserve",
            Point::Permit => "Permit",
            Point::PreBind => "PreBind",
            Point::Bind => "Bind",
            Point::PostBind => "PostBind",
        }
    }
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One plugin object and the extension points it implements (what a
/// registry factory or the wasm adapter builds). A plugin that implements
/// several points shares one object, and so one configuration, between
/// them.
#[derive(Clone)]
pub struct PluginBundle {
    pub plugin: Arc<dyn Plugin>,
    pub pre_enqueue: Option<Arc<dyn PreEnqueuePlugin>>,
    pub queue_sort: Option<Arc<dyn QueueSortPlugin>>,
    pub pre_filter: Option<Arc<dyn PreFilterPlugin>>,
    pub filter: Option<Arc<dyn FilterPlugin>>,
    pub post_filter: Option<Arc<dyn PostFilterPlugin>>,
    pub pre_score: Option<Arc<dyn PreScorePlugin>>,
    pub score: Option<Arc<dyn ScorePlugin>>,
    pub reserve: Option<Arc<dyn ReservePlugin>>,
    pub permit: Option<Arc<dyn PermitPlugin>>,
    pub pre_bind: Option<Arc<dyn PreBindPlugin>>,
    pub bind: Option<Arc<dyn BindPlugin>>,
    pub post_bind: Option<Arc<dyn PostBindPlugin>>,
    /// Advice on preemption's candidates (not an extension point of its
    /// own: DefaultPreemption consults it).
    pub preemption_advisor: Option<Arc<dyn PreemptionAdvisor>>,
    /// Ranks candidate device sets (not an extension point of its own:
    /// DynamicResources consults it).
    pub device_ranker: Option<Arc<dyn DeviceRanker>>,
    /// Cluster state of its own, and pods to activate (not an extension
    /// point either: it comes with membership).
    pub informer: Option<Arc<dyn InformerPlugin>>,
}

impl std::fmt::Debug for PluginBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginBundle")
            .field("name", &self.plugin.name())
            .field("points", &self.points())
            .finish()
    }
}

impl PluginBundle {
    /// A bundle with no extension point yet; add them with the builders.
    pub fn new<T: Plugin + 'static>(plugin: Arc<T>) -> Self {
        Self {
            plugin,
            pre_enqueue: None,
            queue_sort: None,
            pre_filter: None,
            filter: None,
            post_filter: None,
            pre_score: None,
            score: None,
            reserve: None,
            permit: None,
            pre_bind: None,
            bind: None,
            post_bind: None,
            preemption_advisor: None,
            device_ranker: None,
            informer: None,
        }
    }

    pub fn name(&self) -> &str {
        self.plugin.name()
    }

    pub fn with_pre_filter<T: PreFilterPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.pre_filter = Some(p.clone());
        self
    }

    pub fn with_pre_enqueue<T: PreEnqueuePlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.pre_enqueue = Some(p.clone());
        self
    }

    pub fn with_queue_sort<T: QueueSortPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.queue_sort = Some(p.clone());
        self
    }

    pub fn with_filter<T: FilterPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.filter = Some(p.clone());
        self
    }

    pub fn with_post_filter<T: PostFilterPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.post_filter = Some(p.clone());
        self
    }

    pub fn with_pre_score<T: PreScorePlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.pre_score = Some(p.clone());
        self
    }

    pub fn with_score<T: ScorePlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.score = Some(p.clone());
        self
    }

    pub fn with_reserve<T: ReservePlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.reserve = Some(p.clone());
        self
    }

    pub fn with_permit<T: PermitPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.permit = Some(p.clone());
        self
    }

    pub fn with_pre_bind<T: PreBindPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.pre_bind = Some(p.clone());
        self
    }

    pub fn with_bind<T: BindPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.bind = Some(p.clone());
        self
    }

    pub fn with_post_bind<T: PostBindPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.post_bind = Some(p.clone());
        self
    }

    pub fn with_preemption_advisor<T: PreemptionAdvisor + 'static>(mut self, p: &Arc<T>) -> Self {
        self.preemption_advisor = Some(p.clone());
        self
    }

    pub fn with_device_ranker<T: DeviceRanker + 'static>(mut self, p: &Arc<T>) -> Self {
        self.device_ranker = Some(p.clone());
        self
    }

    pub fn with_informer<T: InformerPlugin + 'static>(mut self, p: &Arc<T>) -> Self {
        self.informer = Some(p.clone());
        self
    }

    /// The extension points this bundle implements.
    pub fn points(&self) -> Vec<Point> {
        Point::ALL.into_iter().filter(|p| self.has(*p)).collect()
    }

    pub fn has(&self, point: Point) -> bool {
        match point {
            Point::PreEnqueue => self.pre_enqueue.is_some(),
            Point::QueueSort => self.queue_sort.is_some(),
            Point::PreFilter => self.pre_filter.is_some(),
            Point::Filter => self.filter.is_some(),
            Point::PostFilter => self.post_filter.is_some(),
            Point::PreScore => self.pre_score.is_some(),
            Point::Score => self.score.is_some(),
            Point::Reserve => self.reserve.is_some(),
            Point::Permit => self.permit.is_some(),
            Point::PreBind => self.pre_bind.is_some(),
            Point::Bind => self.bind.is_some(),
            Point::PostBind => self.post_bind.is_some(),
        }
    }
}

/// A Score plugin and its weight (kube-scheduler's `plugins.score.enabled[].weight`).
#[derive(Clone)]
pub struct WeightedScore {
    pub plugin: Arc<dyn ScorePlugin>,
    pub weight: i64,
}

/// Everything one `schedulerName` runs, per extension point, in order.
#[derive(Clone, Default)]
pub struct Profile {
    pub scheduler_name: String,
    /// `percentageOfNodesToScore`; `None` or 0 means upstream's adaptive rule.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Every plugin of the profile once, in the order they were enabled.
    pub members: Vec<Arc<dyn Plugin>>,
    pub pre_enqueue: Vec<Arc<dyn PreEnqueuePlugin>>,
    /// The one QueueSort plugin (every profile of a scheduler has the
    /// same); `None`: priority, then creation time (PrioritySort's).
    pub queue_sort: Option<Arc<dyn QueueSortPlugin>>,
    pub pre_filter: Vec<Arc<dyn PreFilterPlugin>>,
    pub filter: Vec<Arc<dyn FilterPlugin>>,
    pub post_filter: Vec<Arc<dyn PostFilterPlugin>>,
    pub pre_score: Vec<Arc<dyn PreScorePlugin>>,
    pub score: Vec<WeightedScore>,
    pub reserve: Vec<Arc<dyn ReservePlugin>>,
    pub permit: Vec<Arc<dyn PermitPlugin>>,
    pub pre_bind: Vec<Arc<dyn PreBindPlugin>>,
    pub bind: Vec<Arc<dyn BindPlugin>>,
    pub post_bind: Vec<Arc<dyn PostBindPlugin>>,
    /// Members that advise preemption, in member order.
    pub preemption_advisors: Vec<Arc<dyn PreemptionAdvisor>>,
    /// Members that rank device sets, in member order.
    pub device_rankers: Vec<Arc<dyn DeviceRanker>>,
    /// Members with informers of their own, in member order.
    pub informers: Vec<Arc<dyn InformerPlugin>>,
}

impl Profile {
    pub fn new(scheduler_name: &str, percentage_of_nodes_to_score: Option<u32>) -> Self {
        Self {
            scheduler_name: scheduler_name.to_string(),
            percentage_of_nodes_to_score,
            ..Default::default()
        }
    }

    /// Enables `bundle` at `point` (with `weight` for Score). Returns false
    /// when the plugin does not implement the point.
    pub fn enable(&mut self, bundle: &PluginBundle, point: Point, weight: i64) -> bool {
        let b = bundle.clone();
        let added = match point {
            Point::PreEnqueue => push(&mut self.pre_enqueue, b.pre_enqueue),
            Point::QueueSort => match b.queue_sort {
                Some(q) => {
                    self.queue_sort = Some(q);
                    true
                }
                None => false,
            },
            Point::PreFilter => push(&mut self.pre_filter, b.pre_filter),
            Point::Filter => push(&mut self.filter, b.filter),
            Point::PostFilter => push(&mut self.post_filter, b.post_filter),
            Point::PreScore => push(&mut self.pre_score, b.pre_score),
            Point::Score => match b.score {
                Some(plugin) => {
                    self.score.push(WeightedScore { plugin, weight });
                    true
                }
                None => false,
            },
            Point::Reserve => push(&mut self.reserve, b.reserve),
            Point::Permit => push(&mut self.permit, b.permit),
            Point::PreBind => push(&mut self.pre_bind, b.pre_bind),
            Point::Bind => push(&mut self.bind, b.bind),
            Point::PostBind => push(&mut self.post_bind, b.post_bind),
        };
        if added && !self.members.iter().any(|m| m.name() == bundle.name()) {
            self.members.push(bundle.plugin.clone());
        }
        added
    }

    /// Adds what a member offers beside its extension points: its
    /// preemption advisor and its informer, if it has them.
    pub fn attach(&mut self, bundle: &PluginBundle) {
        if !self.members.iter().any(|m| m.name() == bundle.name()) {
            return;
        }
        if let Some(a) = &bundle.preemption_advisor {
            if !named(&self.preemption_advisors, bundle.name()) {
                self.preemption_advisors.push(a.clone());
            }
        }
        if let Some(r) = &bundle.device_ranker {
            if !named(&self.device_rankers, bundle.name()) {
                self.device_rankers.push(r.clone());
            }
        }
        if let Some(i) = &bundle.informer {
            if !named(&self.informers, bundle.name()) {
                self.informers.push(i.clone());
            }
        }
    }

    /// The extension points at which plugin `name` is enabled.
    pub fn points_of(&self, name: &str) -> Vec<Point> {
        let has = |point: Point| match point {
            Point::PreEnqueue => named(&self.pre_enqueue, name),
            Point::QueueSort => self.queue_sort.as_ref().is_some_and(|q| q.name() == name),
            Point::PreFilter => named(&self.pre_filter, name),
            Point::Filter => named(&self.filter, name),
            Point::PostFilter => named(&self.post_filter, name),
            Point::PreScore => named(&self.pre_score, name),
            Point::Score => self.score.iter().any(|s| s.plugin.name() == name),
            Point::Reserve => named(&self.reserve, name),
            Point::Permit => named(&self.permit, name),
            Point::PreBind => named(&self.pre_bind, name),
            Point::Bind => named(&self.bind, name),
            Point::PostBind => named(&self.post_bind, name),
        };
        Point::ALL.into_iter().filter(|p| has(*p)).collect()
    }

    /// This profile with plugin `new.name()` replaced by `new` at every
    /// point where it is enabled (a reloaded plugin). Fails, naming them,
    /// when `new` lacks a point the profile uses.
    pub fn replace(&self, new: &PluginBundle) -> Result<Profile, String> {
        let name = new.name();
        let missing: Vec<&str> = self
            .points_of(name)
            .into_iter()
            .filter(|p| !new.has(*p))
            .map(Point::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the new version lacks {}, which the profile uses",
                missing.join(" and ")
            ));
        }
        let mut p = self.clone();
        swap(&mut p.pre_enqueue, name, &new.pre_enqueue);
        if p.queue_sort.as_ref().is_some_and(|q| q.name() == name) {
            p.queue_sort = new.queue_sort.clone();
        }
        swap(&mut p.pre_filter, name, &new.pre_filter);
        swap(&mut p.filter, name, &new.filter);
        swap(&mut p.post_filter, name, &new.post_filter);
        swap(&mut p.pre_score, name, &new.pre_score);
        for s in &mut p.score {
            if s.plugin.name() == name {
                s.plugin = new.score.clone().expect("checked above");
            }
        }
        swap(&mut p.reserve, name, &new.reserve);
        swap(&mut p.permit, name, &new.permit);
        swap(&mut p.pre_bind, name, &new.pre_bind);
        swap(&mut p.bind, name, &new.bind);
        swap(&mut p.post_bind, name, &new.post_bind);
        p.preemption_advisors.retain(|a| a.name() != name);
        if let Some(a) = &new.preemption_advisor {
            p.preemption_advisors.push(a.clone());
        }
        p.device_rankers.retain(|r| r.name() != name);
        if let Some(r) = &new.device_ranker {
            p.device_rankers.push(r.clone());
        }
        p.informers.retain(|i| i.name() != name);
        if let Some(i) = &new.informer {
            p.informers.push(i.clone());
        }
        for m in &mut p.members {
            if m.name() == name {
                *m = new.plugin.clone();
            }
        }
        Ok(p)
    }
}

fn push<T: ?Sized>(list: &mut Vec<Arc<T>>, item: Option<Arc<T>>) -> bool {
    match item {
        Some(i) => {
            list.push(i);
            true
        }
        None => false,
    }
}

fn named<T: ?Sized + Plugin>(list: &[Arc<T>], name: &str) -> bool {
    list.iter().any(|p| p.name() == name)
}

fn swap<T: ?Sized + Plugin>(list: &mut [Arc<T>], name: &str, new: &Option<Arc<T>>) {
    for item in list.iter_mut() {
        if item.name() == name {
            if let Some(n) = new {
                *item = n.clone();
            }
        }
    }
}

/// Upstream's `numFeasibleNodesToFind`.
pub fn num_feasible_nodes_to_find(num_all_nodes: usize, percentage: Option<u32>) -> usize {
    const MIN_FEASIBLE: usize = 100;
    const MIN_PERCENTAGE: i64 = 5;
    if num_all_nodes < MIN_FEASIBLE {
        return num_all_nodes;
    }
    let pct = match percentage {
        Some(p) if p > 0 => {
            if p >= 100 {
                return num_all_nodes;
            }
            p as i64
        }
        _ => (50 - num_all_nodes as i64 / 125).max(MIN_PERCENTAGE),
    };
    let n = num_all_nodes as i64 * pct / 100;
    (n as usize).max(MIN_FEASIBLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_feasible_matches_upstream_anchors() {
        assert_eq!(num_feasible_nodes_to_find(50, None), 50);
        assert_eq!(num_feasible_nodes_to_find(500, None), 230);
        assert_eq!(num_feasible_nodes_to_find(5000, None), 500);
        assert_eq!(num_feasible_nodes_to_find(5000, Some(100)), 5000);
        assert_eq!(num_feasible_nodes_to_find(1000, Some(1)), 100);
    }
}
