// The registry's table (see `registry.rs`; `host/build.rs` reads this
// file too). One row per plugin:
//   native|wasm "Name" => factory (native) or crate (wasm),
//   points: [the extension points it implements, in framework order],
//   weight: default Score weight (0: not a Score plugin),
//   default: whether the default profile runs it.
// Rows are in upstream's default order: cheap Filters first, so most
// nodes are rejected before the costly ones run.
registry! {
    native "NodeUnschedulable" => plugins::node_unschedulable::new,
        points: [Filter], weight: 0, default: true;
    native "NodeName" => plugins::node_name::new,
        points: [Filter], weight: 0, default: true;
    native "TaintToleration" => plugins::taint_toleration::new,
        points: [Filter, Score], weight: 3, default: true;
    native "NodeAffinity" => plugins::node_affinity::new,
        points: [PreFilter, Filter, Score], weight: 2, default: true;
    native "NodePorts" => plugins::node_ports::new,
        points: [Filter], weight: 0, default: true;
    native "NodeResourcesFit" => plugins::node_resources_fit::new,
        points: [Filter, Score], weight: 1, default: true;
    native "VolumeRestrictions" => plugins::volume::restrictions::new,
        points: [PreFilter, Filter], weight: 0, default: true;
    native "NodeVolumeLimits" => plugins::volume::limits::new,
        points: [Filter], weight: 0, default: true;
    native "VolumeBinding" => plugins::volume::binding::new,
        points: [PreFilter, Filter, PreScore, Score, Reserve, PreBind], weight: 1, default: true;
    native "VolumeZone" => plugins::volume::zone::new,
        points: [Filter], weight: 0, default: true;
    native "PodTopologySpread" => plugins::pod_topology_spread::new,
        points: [PreFilter, Filter, PreScore, Score], weight: 2, default: true;
    native "InterPodAffinity" => plugins::inter_pod_affinity::new,
        points: [PreFilter, Filter, PreScore, Score], weight: 2, default: true;
    native "DynamicResources" => plugins::dynamic_resources::new,
        points: [PreEnqueue, PreFilter, Filter, PostFilter, Score, Reserve, PreBind], weight: 2, default: true;
    native "NodeResourcesBalancedAllocation" => plugins::balanced_allocation::new,
        points: [Score], weight: 1, default: true;
    native "ImageLocality" => plugins::image_locality::new,
        points: [PreScore, Score], weight: 1, default: true;
    native "DefaultPreemption" => plugins::default_preemption::new,
        points: [PostFilter], weight: 0, default: true;
    native "DefaultBinder" => plugins::default_binder::new,
        points: [Bind], weight: 0, default: true;
    // Appended to multiPoint when its gate is on (GA in 1.37), after
    // kube-scheduler's other defaults: its Filter runs last of theirs.
    native "NodeDeclaredFeatures" => plugins::node_declared_features::new,
        points: [PreFilter, Filter], weight: 0, default: true;
    native "HAMiNodeLock" => plugins::hami_node_lock::new,
        points: [Reserve, PreBind], weight: 0, default: true;
    native "Coscheduling" => plugins::coscheduling::new,
        points: [QueueSort, PreFilter, Filter, PostFilter, Reserve, Permit, PostBind], weight: 0, default: true;
    native "PrioritySort" => plugins::priority_sort::new,
        points: [QueueSort], weight: 0, default: true;
    native "SchedulingGates" => plugins::scheduling_gates::new,
        points: [PreEnqueue], weight: 0, default: true;
    wasm "GpuTopology" => "gpu-topology",
        points: [PreFilter, Filter, PreScore, Score], weight: 3, default: true;
    wasm "NetworkLocality" => "network-locality",
        points: [PreFilter, Filter, PreScore, Score], weight: 2, default: true;
    wasm "DeletionCost" => "deletion-cost",
        points: [], weight: 0, default: false;
}
